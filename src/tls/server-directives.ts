/**
 * The ssl_* directives both subsystems' ssl modules have (nginx's
 * ngx_http_ssl_module and ngx_stream_ssl_module share their meaning and
 * messages): certificates and keys (also named by variables), protocols,
 * ciphers, sessions and tickets, client verification, OCSP and stapling.
 * Each module makes its table with its own slot, contexts and variables;
 * values are kept as written (server-conf.ts) and ServerTls compiles them.
 */
import type { ConfContext, ConfSlot } from '../conf/context.ts';
import type { Directive } from '../conf/directive.ts';
import { confPathArg, flagArg, parseSize, parseTime, stringArg } from '../conf/values.ts';
import { listOf, setting, unique } from '../conf/setters.ts';
import { ConfError } from '../conf/errors.ts';
import { Cycle } from '../core/cycle.ts';
import { compileComplex } from '../core/variables.ts';
import type { VariableRegistry } from '../core/variables.ts';
import type { PathValue, SessionCacheConf, SslSrvConf, VerifyMode } from './server-conf.ts';

/** nginx's defaults (ngx_http_ssl_merge_srv_conf and ngx_stream_ssl_merge_conf, current nginx). */
export const SSL_DEFAULTS = {
  protocols: ['TLSv1.2', 'TLSv1.3'],
  ciphers: 'HIGH:!aNULL:!MD5',
  ecdhCurve: 'auto',
  preferServerCiphers: false,
  bufferSize: 16 * 1024,
  verify: 'off',
  verifyDepth: 1,
  sessionCache: { off: false },
  sessionTickets: true,
  sessionTimeout: 300,
  ocsp: 'off',
  stapling: false,
  staplingVerify: false,
  earlyData: false,
  rejectHandshake: false,
} as const satisfies SslSrvConf;

/** A conf command's name and value; the files `Certificate` and `PrivateKey` name resolve against the conf dir. */
export function confCommandArgs(cf: ConfContext, args: readonly string[]): [string, string] {
  const file = /^(certificate|privatekey)$/i.test(args[0]);
  return [args[0], file ? cf.confPath(args[1]) : args[1]];
}

const PROTOCOLS = ['SSLv2', 'SSLv3', 'TLSv1', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3'];

function invalid(cf: ConfContext, v: string): Error {
  return cf.error(`invalid value "${v}" in "${cf.node?.name}" directive`);
}

function zoneSpec(cf: ConfContext, v: string, what: string): { name: string; size: number } {
  const m = /^shared:([^:]+):(.+)$/.exec(v);
  if (!m) throw cf.error(`invalid ${what} "${v}"`);
  const size = parseSize(m[2]);
  if (Number.isNaN(size)) throw cf.error(`invalid zone size "${m[2]}"`);
  if (size < 8 * 4096) throw cf.error(`zone "${m[1]}" is too small`);
  return { name: m[1], size };
}

function parseSessionCache(cf: ConfContext, args: string[]): SessionCacheConf {
  const conf: SessionCacheConf = { off: false };
  for (const a of args) {
    if (a === 'off') { conf.off = true; continue; }
    if (a === 'none') continue;
    if (a === 'builtin') { conf.builtin = 20480; continue; }
    if (a.startsWith('builtin:')) {
      const n = Number(a.slice(8));
      if (!/^\d+$/.test(a.slice(8)) || n === 0) throw cf.error(`invalid session cache "${a}"`);
      conf.builtin = n;
      continue;
    }
    if (a.startsWith('shared:')) { conf.shared = zoneSpec(cf, a, 'session cache'); continue; }
    throw cf.error(`invalid session cache "${a}"`);
  }
  if (conf.off && args.length > 1) throw cf.error(`invalid session cache "${args.join(' ')}"`);
  return conf;
}

/**
 * The shared ssl_* rows for a module whose per-server settings live in
 * `slot`, allowed in `contexts`; `variables` gives the registry that
 * certificate paths with variables compile against.
 */
export function serverTlsDirectives(slot: ConfSlot<SslSrvConf, unknown>, contexts: number, variables: (cf: ConfContext) => VariableRegistry<never>): Directive[] {
  const pathValue = (cf: ConfContext, raw: string): PathValue => {
    if (raw.includes('$')) {
      return { path: raw, complex: compileComplex(cf, variables(cf), raw) as PathValue['complex'], confPrefix: cf.paths.confPrefix };
    }
    return { path: raw.startsWith('data:') ? raw : cf.confPath(raw) };
  };
  const single = <K extends keyof SslSrvConf>(name: string, field: K, parse: (cf: ConfContext, v: string) => SslSrvConf[K], args: 1 | 'flag' = 1): Directive =>
    ({ name, contexts, args, handler: setting(slot, field, parse) });
  return [
    {
      name: 'ssl_certificate', contexts, args: 1,
      handler: listOf(slot, 'certificates', (cf, node) => pathValue(cf, node.args[0])),
    },
    {
      name: 'ssl_certificate_key', contexts, args: 1,
      handler: listOf(slot, 'certificateKeys', (cf, node) => pathValue(cf, node.args[0])),
    },
    {
      name: 'ssl_certificate_cache', contexts, args: [1, 3],
      handler: unique(slot, 'certificateCache', (cf, node, c) => {
        if (node.args[0] === 'off') { c.certificateCache = false; return; }
        const spec = { max: 0, inactive: 10_000, valid: 60_000 };
        for (const a of node.args) {
          const [k, v] = a.split('=', 2);
          const n = k === 'max' ? Number(v) : parseTime(v ?? '');
          if (!['max', 'inactive', 'valid'].includes(k) || !(n > 0)) throw invalid(cf, a);
          spec[k as keyof typeof spec] = n;
        }
        if (!spec.max) throw cf.error('"ssl_certificate_cache" must have the "max" parameter');
        c.certificateCache = spec;
      }),
    },
    {
      name: 'ssl_password_file', contexts, args: 1,
      handler: unique(slot, 'passwordFile', (cf, node, c) => {
        c.passwordFile = confPathArg(cf, node.args[0]);
        // read once, by the master (a FIFO gives its text once); a failure is reported when the key is loaded
        try {
          c.passwordText = Cycle.of(cf).readAuxiliary(c.passwordFile);
        } catch {
          c.passwordText = undefined;
        }
      }),
    },
    single('ssl_dhparam', 'dhparam', confPathArg),
    single('ssl_ecdh_curve', 'ecdhCurve', stringArg),
    {
      name: 'ssl_protocols', contexts, args: [1, Infinity],
      handler: setting(slot, 'protocols', (cf, _v, args) => {
        for (const p of args) if (!PROTOCOLS.includes(p)) throw cf.error(`invalid value "${p}"`);
        return args as string[];
      }),
    },
    single('ssl_ciphers', 'ciphers', stringArg),
    single('ssl_prefer_server_ciphers', 'preferServerCiphers', flagArg, 'flag'),
    single('ssl_verify_client', 'verify', (cf, v) => {
      if (!['off', 'on', 'optional', 'optional_no_ca'].includes(v)) throw cf.error(`invalid value "${v}" in "ssl_verify_client" directive, it must be "on", "off", "optional" or "optional_no_ca"`);
      return v as VerifyMode;
    }),
    single('ssl_verify_depth', 'verifyDepth', (cf, v) => {
      if (!/^\d+$/.test(v)) throw cf.error(`invalid number "${v}"`);
      return Number(v);
    }),
    single('ssl_client_certificate', 'clientCertificate', confPathArg),
    single('ssl_trusted_certificate', 'trustedCertificate', confPathArg),
    single('ssl_crl', 'crl', confPathArg),
    {
      name: 'ssl_session_cache', contexts, args: [1, 2],
      handler: setting(slot, 'sessionCache', (cf, _v, args) => parseSessionCache(cf, args as string[])),
    },
    single('ssl_session_tickets', 'sessionTickets', flagArg, 'flag'),
    {
      name: 'ssl_session_ticket_key', contexts, args: 1,
      handler: listOf(slot, 'sessionTicketKeys', (cf, node) => cf.confPath(node.args[0])),
    },
    single('ssl_session_timeout', 'sessionTimeout', (cf, v) => {
      const ms = parseTime(v);
      if (Number.isNaN(ms)) throw cf.error(`"${cf.node?.name}" directive invalid value`);
      return Math.floor(ms / 1000);
    }),
    single('ssl_ocsp', 'ocsp', (cf, v) => {
      if (!['off', 'on', 'leaf'].includes(v)) throw cf.error(`invalid value "${v}" in "ssl_ocsp" directive, it must be "off", "on" or "leaf"`);
      return v as 'off' | 'on' | 'leaf';
    }),
    single('ssl_ocsp_responder', 'ocspResponder', stringArg),
    single('ssl_ocsp_cache', 'ocspCache', (cf, v) => (v === 'off' ? false : zoneSpec(cf, v, 'ocsp cache'))),
    {
      name: 'ssl_stapling', contexts, args: 'flag',
      handler: unique(slot, 'stapling', (cf, node, c) => {
        c.stapling = flagArg(cf, node.args[0]);
        // nginx warns about certificates it cannot staple for without a location: keep the reader's sink
        const sink = Cycle.of(cf).options.onWarning;
        c.warn = (message) => {
          const w = new ConfError(message);
          w.level = 'warn';
          sink?.(w);
        };
      }),
    },
    single('ssl_stapling_file', 'staplingFile', confPathArg),
    single('ssl_stapling_responder', 'staplingResponder', stringArg),
    single('ssl_stapling_verify', 'staplingVerify', flagArg, 'flag'),
    {
      name: 'ssl_conf_command', contexts, args: 2,
      handler: listOf(slot, 'confCommands', (cf, node): [string, string] => confCommandArgs(cf, node.args)),
    },
    single('ssl_reject_handshake', 'rejectHandshake', flagArg, 'flag'),
  ];
}
