/**
 * The gateway's certificates by SNI (apisix/ssl/router/radixtree_sni.lua,
 * apisix/init.lua ssl_client_hello_phase and verify_https_client): the SSL
 * objects of the configuration version a worker holds, indexed by name —
 * an exact `sni` first, then `*.example.com` for exactly one more label,
 * then `*` — and, where several objects hold the chosen name, the newest
 * whose certificate is valid now (APISIX's radixtree keeps the first one
 * it was given, its issues #10199 and #11729). A client without SNI is
 * taken for `apisix.ssl.fallback_sni`. Each object's TLS context is built
 * once per stored version, so a change is served from the next handshake
 * on. `client.ca` asks for a client certificate: without
 * `skip_mtls_uri_regex` one that fails the check refuses the handshake,
 * with it the request is answered 400 unless its URI matches.
 */
import crypto from 'node:crypto';
import tls from 'node:tls';
import type { HandshakeChoice } from '../../tls/handshake-choice.ts';
import { createSelfSigned } from '../../tls/x509-builder.ts';
import type { HttpRequest } from '../../http/request.ts';
import type { ConfigView, SslConf } from '../router/config-view.ts';
import { resolveRefs } from './secret-refs.ts';

export interface SslSettings {
  fallbackSni: string | undefined;
  /** apisix.ssl.ssl_protocols, for objects without their own. */
  protocols: string[];
}

interface Candidate { conf: SslConf; revision: number }

/** One version's SSL objects by name: exact names, `*.` suffixes (with their dot), and `*`. */
interface SniIndex {
  exact: Map<string, Candidate[]>;
  wildcard: Map<string, Candidate[]>;
  any: Candidate[];
}

const indexes = new WeakMap<ConfigView, SniIndex>();

/** APISIX's ssl_filter: names lowercase, without a final dot. */
function normalName(name: string): string {
  return name.replace(/\.$/, '').toLowerCase();
}

function indexOf(view: ConfigView): SniIndex {
  let idx = indexes.get(view);
  if (idx) return idx;
  idx = { exact: new Map(), wildcard: new Map(), any: [] };
  for (const c of view.ssls) {
    const conf = c.conf;
    // `type: client` objects are certificates for upstreams; status 0 leaves one out
    if ((conf.type ?? 'server') !== 'server' || conf.status === 0) continue;
    const names = conf.snis?.length ? conf.snis : conf.sni !== undefined ? [conf.sni] : [];
    for (const raw of names) {
      const name = normalName(raw);
      if (name === '*') idx.any.push(c);
      else if (name.startsWith('*.')) push(idx.wildcard, name.slice(1), c);
      else push(idx.exact, name, c);
    }
  }
  indexes.set(view, idx);
  return idx;
}

function push(m: Map<string, Candidate[]>, k: string, c: Candidate): void {
  const list = m.get(k);
  if (list) list.push(c);
  else m.set(k, [c]);
}

const resolvedConfs = new WeakMap<SslConf, SslConf>();

/** The object with its `$env://` references resolved (once per stored version); throws one that does not resolve. */
function resolved(conf: SslConf): SslConf {
  let r = resolvedConfs.get(conf);
  if (!r) resolvedConfs.set(conf, (r = resolveRefs(conf, ['cert', 'key', 'certs', 'keys', 'client.ca'])));
  return r;
}

const validity = new WeakMap<SslConf, { from: number; to: number }>();

function validNow(conf: SslConf): boolean {
  let v = validity.get(conf);
  if (!v) {
    try {
      const x = new crypto.X509Certificate(resolved(conf).cert);
      v = { from: Date.parse(x.validFrom), to: Date.parse(x.validTo) };
    } catch {
      v = { from: Infinity, to: -Infinity };
    }
    validity.set(conf, v);
  }
  const now = Date.now();
  return now >= v.from && now <= v.to;
}

/** The SSL object for `sni`: exact, then one-label wildcard, then `*`; among equals the newest valid one. */
export function matchSsl(view: ConfigView, sni: string): SslConf | undefined {
  const idx = indexOf(view);
  const name = normalName(sni);
  const dot = name.indexOf('.');
  const list = idx.exact.get(name) ?? (dot > 0 ? idx.wildcard.get(name.slice(dot)) : undefined) ?? (idx.any.length ? idx.any : undefined);
  if (!list) return undefined;
  let best: Candidate | undefined;
  let bestValid = false;
  for (const c of list) {
    const valid = validNow(c.conf);
    if (!best || (valid && !bestValid) || (valid === bestValid && c.revision > best.revision)) {
      best = c;
      bestValid = valid;
    }
  }
  return best?.conf;
}

const choices = new WeakMap<SslConf, HandshakeChoice>();

/** The TLS context of an SSL object (cert/key and certs/keys side by side, its client CA). */
function choiceOf(conf: SslConf, defaults: SslSettings): HandshakeChoice {
  let c = choices.get(conf);
  if (c) return c;
  const stored = conf;
  conf = resolved(conf);
  const protocols = (conf.ssl_protocols?.length ? conf.ssl_protocols : defaults.protocols).slice().sort() as tls.SecureVersion[];
  const ca = conf.client?.ca;
  // an object whose certificate is ordered (`acme`) serves a self-signed placeholder until it is issued, as acme_certificate does
  const own = conf.cert === undefined && conf.acme ? placeholder(conf) : { cert: conf.cert, key: conf.key };
  const context = tls.createSecureContext({
    cert: [own.cert, ...(conf.certs ?? [])],
    key: [own.key, ...(conf.keys ?? [])],
    ca,
    minVersion: protocols[0],
    maxVersion: protocols[protocols.length - 1],
  });
  c = { context };
  if (ca !== undefined && conf.client) {
    const trusted = (ca.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map((p) => new crypto.X509Certificate(p));
    const skip = conf.client.skip_mtls_uri_regex;
    c.verify = { conf: { verify: skip ? 'optional' : 'on', verifyDepth: conf.client.depth ?? 1 }, trusted, crls: [], ocsp: undefined };
    c.requireClient = !skip;
  }
  choices.set(stored, c);
  return c;
}

function placeholder(conf: SslConf): { cert: string; key: string } {
  const key = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey;
  const names = conf.snis?.length ? conf.snis : conf.sni !== undefined ? [conf.sni] : [];
  return { cert: createSelfSigned(key, { names }), key: key.export({ type: 'pkcs8', format: 'pem' }) as string };
}

/** What a connection's handshake matched: the SNI (or fallback) and its SSL object. */
const matched = new WeakMap<object, { sni: string; ssl: SslConf }>();

/** Chooses the certificates of a handshake; a string is the error APISIX logs when it refuses one. */
export function chooseCertificate(view: ConfigView, settings: SslSettings, conn: object, serverName: string | undefined): HandshakeChoice | string {
  const sni = serverName !== undefined && serverName !== '' ? normalName(serverName) : settings.fallbackSni;
  if (sni === undefined) {
    return 'failed to find SNI: please check if the client requests via IP or uses an outdated protocol. '
      + 'If you need to report an issue, provide a packet capture file of the TLS handshake.';
  }
  const ssl = matchSsl(view, sni);
  if (!ssl) return `failed to find any SSL certificate by SNI: ${sni}`;
  let choice: HandshakeChoice;
  try {
    choice = choiceOf(ssl, settings);
  } catch (e) {
    return `failed to fetch ssl config: ${(e as Error).message}`;
  }
  matched.set(conn, { sni, ssl });
  return choice;
}

/**
 * verify_https_client: on a TLS connection whose SSL object skips client
 * verification for some URIs, other URIs need a verified certificate; and
 * a Host whose SSL object verifies clients must be the SNI the certificate
 * was checked with. Undefined: go on; else the error to log (the answer is 400).
 */
export function httpsClientError(r: HttpRequest, view: ConfigView): string | undefined {
  const t = r.conn.tls;
  if (!t) return undefined;
  const m = matched.get(r.conn);
  if (!m) return undefined;
  const client = m.ssl.client;
  if (client?.skip_mtls_uri_regex && !client.skip_mtls_uri_regex.some((p) => safeRegex(p)?.test(r.uri))) {
    const v = t.verify;
    if (!v) return 'client certificate was not present';
    if (v.code !== 0) return `client certificate verification is not passed: FAILED:${v.reason}`;
  }
  const byHost = matchSsl(view, r.host);
  if (byHost?.client && m.sni !== r.host) return `client certificate verified with SNI ${m.sni}, but the host is ${r.host}`;
  return undefined;
}

const regexes = new Map<string, RegExp | null>();

function safeRegex(p: string): RegExp | null {
  let re = regexes.get(p);
  if (re === undefined) {
    try { re = new RegExp(p); } catch { re = null; }
    regexes.set(p, re);
  }
  return re;
}
