/**
 * ngx_http_acme_module (nginx-acme): `acme_issuer name { … }`,
 * `acme_shared_zone`, `acme_certificate` in a server, and
 * `$acme_certificate` / `$acme_certificate_key` for `ssl_certificate`;
 * plus Gatehouse's `acme_status` in a location.
 * The protocol client is src/acme/; what it obtains is shared by every
 * worker through the run-time certificate registry (src/tls). Directives
 * and their errors are nginx-acme's; what differs (no `resolver` needed,
 * a self-signed placeholder before the first certificate) is in
 * docs/acme.md.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { Ctx } from '../../conf/directive.ts';
import type { ConfContext } from '../../conf/context.ts';
import { ConfError } from '../../conf/errors.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { flagArg, parseSize, parseTime } from '../../conf/values.ts';
import { resolverForArgs } from '../../upstream/resolver.ts';
import { coreLoc } from '../core/settings.ts';
import { Cycle } from '../../core/cycle.ts';
import type { WorkerRuntime } from '../../core/cycle.ts';
import { sharedZone } from '../../core/shared.ts';
import type { SharedDocument } from '../../core/shared-document.ts';
import { runtimeCertificate, setRuntimeCertificate, useCertificateZone } from '../../tls/certificate-registry.ts';
import type { RuntimeCertificate } from '../../tls/certificate-registry.ts';
import { createSelfSigned } from '../../tls/x509-builder.ts';
import { addIdentifier } from '../../acme/identifiers.ts';
import type { KeySpec } from '../../acme/jws.ts';
import { AcmeManager } from '../../acme/manager.ts';
import { http01Answer, HTTP01_PREFIX } from '../../acme/solvers/http-01.ts';
import { dnsAnswer } from '../../acme/solvers/dns-responder.ts';
import { certificateFits, orderId, storedCertificate } from '../../acme/state.ts';
import { certificateStatuses } from '../../acme/status.ts';
import type { IssuerConf, OrderConf } from '../../acme/state.ts';
import { DECLINED, DONE, httpConf } from '../http-conf.ts';
import type { HttpMainConf, HttpModule, LocationConf, ServerConf } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { sendSimple } from '../response.ts';

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

/** `ecdsa[:256|384|521]`, `rsa[:2048|3072|4096]`, else a file (nginx-acme's PrivateKey). */
function keySpec(value: string): KeySpec | string {
  const [kind, size] = value.includes(':') ? [value.slice(0, value.indexOf(':')), value.slice(value.indexOf(':') + 1)] : [value, undefined];
  if (kind === 'ecdsa') {
    const bits = size === undefined ? 256 : Number(size);
    return bits === 256 || bits === 384 || bits === 521 ? { type: 'ecdsa', bits } : 'unsupported curve';
  }
  if (kind === 'rsa') {
    const bits = size === undefined ? 2048 : Number(size);
    return bits === 2048 || bits === 3072 || bits === 4096 ? { type: 'rsa', bits } : 'unsupported key size';
  }
  return { type: 'file', path: value };
}

type IssuerDraft = Partial<IssuerConf> & { name: string; contacts: string[]; statePathSet?: boolean };

const ISSUER_ARGS: Record<string, number | [number, number]> = {
  uri: 1, account_key: 1, challenge: 1, common_name_in_csr: 1, contact: 1, external_account_key: 2,
  preferred_chain: 1, profile: [1, 2], ssl_trusted_certificate: 1, ssl_verify: 1, state_path: 1, accept_terms_of_service: 0,
  dns_hook: 1,
};

/** One directive inside `acme_issuer { }`; a string is nginx-acme's `"name" directive <string>`. */
function issuerDirective(cf: ConfContext, d: IssuerDraft, node: ConfNode, seen: Set<string>): string | undefined {
  const [a, b] = node.args;
  const once = (field: string) => {
    if (seen.has(field)) return 'is duplicate';
    seen.add(field);
    return undefined;
  };
  switch (node.name) {
    case 'uri': {
      let u: URL;
      try { u = new URL(a); } catch { return 'invalid value'; }
      d.uri = u.href;
      return undefined;
    }
    case 'account_key': {
      const dup = once('account_key');
      if (dup) return dup;
      const spec = keySpec(a);
      if (typeof spec === 'string') throw cf.error(`account_key: ${spec}`);
      d.accountKey = spec.type === 'file' ? { type: 'file', path: cf.confPath(spec.path) } : spec;
      return undefined;
    }
    case 'challenge': {
      const dup = once('challenge');
      if (dup) return dup;
      if (a === 'http' || a === 'http-01') d.challenge = 'http-01';
      else if (a === 'tls-alpn' || a === 'tls-alpn-01') d.challenge = 'tls-alpn-01';
      else if (a === 'dns' || a === 'dns-01') d.challenge = 'dns-01';
      else throw cf.error(`unsupported challenge: ${a}`);
      return undefined;
    }
    case 'common_name_in_csr': return once('common_name_in_csr') ?? void (d.commonNameInCsr = flagArg(cf, a));
    case 'contact':
      if (!a) return 'invalid value';
      d.contacts.push(/^[a-z][a-z0-9+.-]*:/i.test(a) ? a : `mailto:${a}`);
      return undefined;
    case 'external_account_key': {
      const dup = once('external_account_key');
      if (dup) return dup;
      if (!a || !b) return 'invalid value';
      let encoded: string;
      try {
        encoded = b.startsWith('data:') ? b.slice(5) : fs.readFileSync(cf.confPath(b), 'latin1');
      } catch (err) {
        throw cf.error(`external_account_key: ${(err as Error).message}`);
      }
      encoded = encoded.trim();
      if (!/^[A-Za-z0-9_-]+={0,2}$/.test(encoded)) return 'invalid base64url encoded value';
      d.eab = { kid: a, key: Buffer.from(encoded, 'base64url') };
      return undefined;
    }
    case 'preferred_chain': return once('preferred_chain') ?? void (d.preferredChain = a);
    case 'profile': {
      const dup = once('profile');
      if (dup) return dup;
      if (b !== undefined && b !== 'require') return 'invalid value';
      d.profile = { name: a, require: b === 'require' };
      return undefined;
    }
    case 'ssl_trusted_certificate': return once('ssl_trusted_certificate') ?? void (d.trustedCertificate = cf.confPath(a));
    case 'ssl_verify': return once('ssl_verify') ?? void (d.verify = flagArg(cf, a));
    case 'state_path': {
      const dup = once('state_path');
      if (dup) return dup;
      d.statePathSet = true;
      d.statePath = a === 'off' ? undefined : cf.prefixPath(a);
      return undefined;
    }
    case 'accept_terms_of_service': return once('accept_terms_of_service') ?? void (d.acceptTos = true);
    case 'dns_hook': return once('dns_hook') ?? void (d.dnsHook = cf.confPath(a));
  }
  return undefined;
}

function acmeIssuer(cf: ConfContext, node: ConfNode): string | void {
  const m = mainOf(cf);
  const name = node.args[0];
  if (m.issuers.has(name)) return 'is duplicate';
  const d: IssuerDraft = { name, contacts: [] };
  const seen = new Set<string>();
  const outer = cf.node;
  for (const child of node.children ?? []) {
    cf.node = child;
    const want = ISSUER_ARGS[child.name];
    if (want === undefined) throw cf.error(`unknown directive "${child.name}"`);
    const n = child.args.length;
    if (typeof want === 'number' ? n !== want : n < want[0] || n > want[1]) throw cf.error(`invalid number of arguments in "${child.name}"`);
    const err = issuerDirective(cf, d, child, seen);
    if (err) throw cf.error(`"${child.name}" directive ${err}`);
  }
  cf.node = outer;
  cf.bodyRead = true;
  if (!d.uri || !new URL(d.uri).host) throw cf.error('acme_issuer: "uri" is missing');
  const issuer: IssuerConf = {
    name, uri: d.uri, accountKey: d.accountKey ?? { type: 'ecdsa', bits: 256 }, challenge: d.challenge ?? 'http-01',
    contacts: d.contacts, commonNameInCsr: d.commonNameInCsr ?? false, eab: d.eab, preferredChain: d.preferredChain, profile: d.profile,
    trustedCertificate: d.trustedCertificate, verify: d.verify ?? true, dnsHook: d.dnsHook,
    statePath: d.statePathSet ? d.statePath : cf.prefixPath(`acme_${name}`), acceptTos: d.acceptTos ?? false,
  };
  if (issuer.accountKey.type === 'file') {
    try {
      crypto.createPrivateKey(fs.readFileSync(issuer.accountKey.path, 'latin1'));
    } catch (err) {
      throw cf.error(`acme_issuer: cannot load account key: ${(err as Error).message}`);
    }
  }
  if (issuer.trustedCertificate && !fs.existsSync(issuer.trustedCertificate)) throw cf.error('acme_issuer: trusted ceritificate configuration failed');
  m.issuers.set(name, issuer);
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
  m.dnsListener = key;
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
