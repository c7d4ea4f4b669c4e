/**
 * ngx_http_acme_module (nginx-acme): `acme_issuer name { … }` (read in
 * issuer.ts), `acme_shared_zone`, `acme_certificate` in a server, and
 * `$acme_certificate` / `$acme_certificate_key` for `ssl_certificate`;
 * plus Gatehouse's `acme_status` (a location) and Angie's `acme_dns_port`.
 * The protocol client is src/acme/; what it obtains is shared by every
 * worker through the run-time certificate registry (src/tls). Directives
 * and their errors are nginx-acme's; what differs (a self-signed
 * placeholder before the first certificate, `fallback=`, dns-01) is in
 * docs/acme.md.
 */
import crypto from 'node:crypto';
import { Ctx } from '../../../conf/directive.ts';
import type { ConfContext } from '../../../conf/context.ts';
import { ConfError } from '../../../conf/errors.ts';
import type { ConfNode } from '../../../conf/parser.ts';
import { parseSize, parseTime } from '../../../conf/values.ts';
import { resolverForArgs } from '../../../upstream/resolver.ts';
import { Cycle } from '../../../core/cycle.ts';
import type { WorkerRuntime } from '../../../core/cycle.ts';
import { sharedZone } from '../../../core/shared.ts';
import type { SharedDocument } from '../../../core/shared-document.ts';
import { runtimeCertificate, setRuntimeCertificate, useCertificateZone } from '../../../tls/certificate-registry.ts';
import type { RuntimeCertificate } from '../../../tls/certificate-registry.ts';
import { createSelfSigned } from '../../../tls/x509-builder.ts';
import { addIdentifier } from '../../../acme/identifiers.ts';
import type { KeySpec } from '../../../acme/jws.ts';
import { AcmeManager } from '../../../acme/manager.ts';
import { http01Answer, HTTP01_PREFIX } from '../../../acme/solvers/http-01.ts';
import { dnsAnswer, dnsTcpConnection } from '../../../acme/solvers/dns-responder.ts';
import { certificateFits, orderId, storedCertificate } from '../../../acme/state.ts';
import { certificateStatuses } from '../../../acme/status.ts';
import type { IssuerConf, OrderConf } from '../../../acme/state.ts';
import { coreLoc } from '../../core/settings.ts';
import { DECLINED, DONE, httpConf } from '../../http-conf.ts';
import type { HttpMainConf, HttpModule, LocationConf, ServerConf } from '../../http-conf.ts';
import type { HttpRequest } from '../../request.ts';
import { sendSimple } from '../../response.ts';
import { keySpec, readIssuer } from './issuer.ts';

/** What one configuration's http block asks of the module. */
interface AcmeMain {
  issuers: Map<string, IssuerConf>;
  zone?: { name: string; size: number };
  /** acme_certificate per server, as written (names resolved in postconfiguration). */
  requests: Map<ServerConf, { issuer: string; fallbacks: string[]; names: string[]; key: KeySpec; file: string; line: number }>;
  orders: Map<ServerConf, OrderConf>;
  doc?: SharedDocument;
  /** `acme_dns_port`: the UDP listener answering dns-01 queries. */
  dnsListener?: string;
  /** And the TCP one at the same address. */
  dnsTcpListener?: string;
}

const mains = new WeakMap<object, AcmeMain>();

function mainOf(cf: ConfContext): AcmeMain {
  const http = cf.data.http as object;
  let m = mains.get(http);
  if (!m) mains.set(http, (m = { issuers: new Map(), requests: new Map(), orders: new Map() }));
  return m;
}

const DEFAULT_ZONE = { name: 'ngx_acme_shared', size: 256 * 1024 };
const MIN_ZONE_SIZE = 32 * 1024;

function acmeIssuer(cf: ConfContext, node: ConfNode): string | void {
  const m = mainOf(cf);
  if (m.issuers.has(node.args[0])) return 'is duplicate';
  m.issuers.set(node.args[0], readIssuer(cf, node));
}

function acmeSharedZone(cf: ConfContext, node: ConfNode): string | void {
  const m = mainOf(cf);
  if (m.zone) return 'is duplicate';
  const v = node.args[0];
  if (!v.startsWith('zone=')) throw cf.error('"acme_shared_zone" must have "zone" parameter');
  const value = v.slice(5);
  const colon = value.indexOf(':');
  const size = colon > 0 ? parseSize(value.slice(colon + 1)) : NaN;
  if (!(size >= 0)) throw cf.error(`acme_shared_zone: invalid zone size "${value}"`);
  const name = value.slice(0, colon);
  if (size < MIN_ZONE_SIZE) throw cf.error(`acme_shared_zone: zone ${name} is too small`);
  m.zone = { name, size };
}

/** `acme_dns_port number | address:number` (Angie's): where the built-in dns-01 responder listens (UDP). */
function acmeDnsPort(cf: ConfContext, node: ConfNode): string | void {
  const m = mainOf(cf);
  if (m.dnsListener) return 'is duplicate';
  const v = node.args[0];
  const at = /^(?:(\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:.]+\]|[\w.-]+):)?(\d+)$/.exec(v);
  const port = at ? Number(at[2]) : NaN;
  if (!at || !(port >= 1 && port <= 65535)) return 'invalid value';
  const host = (at[1] ?? '0.0.0.0').replace(/^\[|\]$/g, '');
  const key = `udp:${host.includes(':') ? `[${host}]` : host}:${port}`;
  Cycle.of(cf).addListener({ key, protocol: 'http', host, port, udp: true });
  // and over TCP, for answers too long for UDP (RFC 7766)
  const tcpKey = key.slice(4);
  Cycle.of(cf).addListener({ key: tcpKey, protocol: 'http', host, port });
  m.dnsListener = key;
  m.dnsTcpListener = tcpKey;
}

function acmeCertificate(cf: ConfContext, node: ConfNode): string | void {
  const m = mainOf(cf);
  const server = cf.data.server as ServerConf;
  if (m.requests.has(server)) return 'is duplicate';
  const [issuer, ...rest] = node.args;
  if (!issuer) return '"issuer" is missing';
  const names: string[] = [];
  let key: KeySpec = { type: 'ecdsa', bits: 256 };
  let fallbacks: string[] = [];
  for (const v of rest) {
    if (v.startsWith('fallback=')) {
      fallbacks = v.slice(9).split(',');
      if (fallbacks.some((f) => !f)) return 'invalid "fallback" value';
      continue;
    }
    if (v.startsWith('key=')) {
      const spec = keySpec(v.slice(4));
      if (typeof spec === 'string') throw cf.error(`acme_certificate: ${spec}`);
      if (spec.type === 'file') return 'invalid "key" value';
      key = spec;
      continue;
    }
    if (!v) return 'invalid value';
    const err = addIdentifier(names, v);
    if (err) throw cf.error(`acme_certificate: invalid server name: ${err}`);
  }
  m.requests.set(server, { issuer, fallbacks, names, key, file: node.file, line: node.line });
}

function postconfiguration(http: HttpMainConf): void {
  const m = mains.get(http);
  if (!m) return;
  for (const [server, req] of m.requests) {
    const names = [...req.names];
    if (!names.length) {
      for (const sn of server.names) {
        if (sn.regex || !sn.name) continue;
        const err = addIdentifier(names, sn.name);
        if (err) throw new ConfError(`"acme_certificate": invalid server name: ${err}`);
      }
      if (!names.length) throw new ConfError('"acme_certificate": no identifiers found in "server_name"', req.file, req.line);
    }
    const [issuer, ...fallbacks] = [req.issuer, ...req.fallbacks].map((name) => {
      const found = m.issuers.get(name);
      if (!found) throw new ConfError(`issuer "${name}" is missing`, req.file, req.line);
      return found;
    });
    m.orders.set(server, { issuer, fallbacks, names, key: req.key, id: orderId(names, req.key) });
  }
  if (!m.issuers.size) return;
  for (const issuer of m.issuers.values()) {
    if (issuer.challenge === 'dns-01' && !issuer.dnsHook && !m.dnsListener) {
      throw new ConfError(`acme_issuer: "dns_hook" or "acme_dns_port" is needed for the dns-01 challenge of issuer "${issuer.name}"`);
    }
  }
  // as in nginx-acme, the ACME server's name is looked up with the http block's resolver (else the system's)
  const core = http.level.get(coreLoc);
  const resolver = core.resolverArgs && resolverForArgs(core.resolverArgs, parseTime, core.resolverTimeout);
  if (resolver) for (const issuer of m.issuers.values()) issuer.resolve = (host) => resolver.resolve(host);
  const zone = m.zone ?? DEFAULT_ZONE;
  m.doc = useCertificateZone(sharedZone(`acme_shared_zone:${zone.name}`, zone.size));
  // a certificate kept in state_path is served at once, even while the CA is unreachable
  for (const order of m.orders.values()) {
    const current = runtimeCertificate(order.id);
    if (current && certificateFits(current, order.names)) continue;
    const stored = storedCertificate(order);
    if (stored) setRuntimeCertificate(order.id, stored.cert);
  }
  http.addPhaseHandler('POST_READ', 200, answerHttp01);
}

/**
 * The issuers and shared zone of a configuration's http block: the
 * gateway's SSL objects order their certificates with them
 * (src/gateway/acme/), answered by the same http-01, tls-alpn-01 and dns-01
 * responders.
 */
export function acmeIssuers(http: HttpMainConf): { issuers: ReadonlyMap<string, IssuerConf>; doc: SharedDocument } | undefined {
  const m = mains.get(http);
  return m?.doc && m.issuers.size ? { issuers: m.issuers, doc: m.doc } : undefined;
}

/** http-01: the key authorization for a GET, before anything else runs (nginx-acme's POST_READ handler). */
function answerHttp01(r: HttpRequest): number | Promise<number> {
  if (r.method !== 'GET' || !r.uri.startsWith(HTTP01_PREFIX)) return DECLINED;
  const doc = mains.get(r.main)?.doc;
  const answer = doc && http01Answer(doc, r.uri.slice(HTTP01_PREFIX.length));
  if (answer === undefined) return DECLINED;
  return sendSimple(r, 200, answer, 'text/plain').then(() => DONE);
}

/** Self-signed certificates served before the first one is issued (one per order, per thread). */
const placeholders = new Map<string, RuntimeCertificate>();

function certificateOf(r: HttpRequest): RuntimeCertificate | undefined {
  const order = mains.get(r.main)?.orders.get(r.server);
  if (!order) return undefined;
  const issued = runtimeCertificate(order.id);
  if (issued) return issued;
  let p = placeholders.get(order.id);
  if (!p) {
    const key = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey;
    p = { certPem: createSelfSigned(key, { names: order.names }), keyPem: key.export({ type: 'pkcs8', format: 'pem' }) as string };
    placeholders.set(order.id, p);
  }
  return p;
}

/**
 * `acme_status` (a Gatehouse addition; nginx-acme has no status yet): every
 * certificate the configuration asks for, its validity, renewal time and
 * last error, as JSON.
 */
async function statusHandler(r: HttpRequest): Promise<number> {
  if (r.method !== 'GET' && r.method !== 'HEAD') return 405;
  const m = mains.get(r.main);
  const all = m?.doc ? certificateStatuses(m.doc) : {};
  const ids = [...new Set([...(m?.orders.values() ?? [])].map((o) => o.id))].sort();
  const certificates = ids.map((id) => {
    const st = all[id];
    return {
      name: id, issuer: st?.issuer, identifiers: st?.identifiers, state: st?.state ?? 'pending',
      not_before: st?.notBefore, not_after: st?.notAfter, renew_at: st?.renewAt,
      next_attempt: st?.nextAttempt, last_error: st?.lastError, last_error_at: st?.lastErrorAt,
    };
  });
  await sendSimple(r, 200, `${JSON.stringify({ certificates }, null, 2)}\n`, 'application/json');
  return DONE;
}

function initWorker(cycle: Cycle, worker: WorkerRuntime): void {
  const http = httpConf(cycle);
  const m = http && mains.get(http);
  if (!m?.doc) return;
  const doc = m.doc;
  // every worker answers dns-01 queries from the shared zone
  if (m.dnsListener) {
    worker.onDatagram(m.dnsListener, (msg, from, socket) => {
      const answer = dnsAnswer(doc, msg);
      if (answer) socket.send(answer, from.port, from.address);
    });
    if (m.dnsTcpListener) worker.onConnection(m.dnsTcpListener, (socket) => dnsTcpConnection(doc, socket));
  }
  if (!m.orders.size || worker.workerId !== 0) return;
  // servers asking for the same names and key share one certificate
  const orders = new Map([...m.orders.values()].map((o) => [o.id, o]));
  const manager = new AcmeManager([...orders.values()], doc, worker.log);
  manager.start();
  worker.onShutdown(() => manager.stop());
  worker.onClose(() => manager.stop());
}

export const acmeModule: HttpModule = {
  name: 'ngx_http_acme_module',
  directives: [
    { name: 'acme_issuer', contexts: Ctx.HTTP, args: 1, block: true, handler: acmeIssuer },
    { name: 'acme_shared_zone', contexts: Ctx.HTTP, args: 1, handler: acmeSharedZone },
    { name: 'acme_dns_port', contexts: Ctx.HTTP, args: 1, handler: acmeDnsPort },
    { name: 'acme_certificate', contexts: Ctx.SERVER, args: [1, Infinity], handler: acmeCertificate },
    { name: 'acme_status', contexts: Ctx.LOCATION, args: 0, handler: (cf) => { (cf.data.location as LocationConf).contentHandler = statusHandler; } },
  ],
  variables: [
    { name: 'acme_certificate', noCache: true, get: (r) => { const c = certificateOf(r); return c && `data:${c.certPem}`; } },
    { name: 'acme_certificate_key', noCache: true, get: (r) => { const c = certificateOf(r); return c && `data:${c.keyPem}`; } },
  ],
  postconfiguration,
  initWorker,
};
