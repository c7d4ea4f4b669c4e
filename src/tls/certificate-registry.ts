/**
 * Certificates installed at run time, by name, shared by every worker
 * thread through a shared zone (src/core/shared-document.ts): what the
 * ACME client obtains is served from the next handshake on in every
 * worker, without a reload. Two kinds of entries:
 *   - `certificates`: a name's certificate chain and key (read by
 *     `$acme_certificate` / `$acme_certificate_key`);
 *   - `tls-alpn-01`: RFC 8737 challenge certificates by server name,
 *     answered to a ClientHello that offers only `acme-tls/1`.
 */
import tls from 'node:tls';
import { SharedDocument } from '../core/shared-document.ts';
import type { ClientHello } from './client-hello.ts';

export interface RuntimeCertificate {
  /** The leaf and its chain, PEM. */
  certPem: string;
  /** The private key, PKCS#8 PEM. */
  keyPem: string;
}

const CERTIFICATES = 'certificates';
const ALPN_CHALLENGES = 'tls-alpn-01';
/** RFC 8737's ALPN protocol. */
export const ACME_TLS_ALPN = 'acme-tls/1';

let store: SharedDocument | undefined;
let storeBuffer: SharedArrayBuffer | undefined;

/** Binds this thread to the zone the configuration names (the same buffer in every worker). */
export function useCertificateZone(buf: SharedArrayBuffer): SharedDocument {
  if (storeBuffer !== buf) {
    storeBuffer = buf;
    store = new SharedDocument(buf);
  }
  return store!;
}

function entries(kind: string): Record<string, unknown> {
  return store?.read()[kind] ?? {};
}

function put(kind: string, name: string, value: RuntimeCertificate | undefined): void {
  if (!store) throw new Error('no certificate zone');
  store.update((d) => {
    const m = (d[kind] ??= {});
    if (value) m[name] = value;
    else delete m[name];
  });
}

export function runtimeCertificate(name: string): RuntimeCertificate | undefined {
  return entries(CERTIFICATES)[name] as RuntimeCertificate | undefined;
}

export function setRuntimeCertificate(name: string, cert: RuntimeCertificate | undefined): void {
  put(CERTIFICATES, name, cert);
}

export function setAlpnChallenge(serverName: string, cert: RuntimeCertificate | undefined): void {
  put(ALPN_CHALLENGES, serverName.toLowerCase(), cert);
}

const challengeContexts = new Map<string, { pem: string; context: tls.SecureContext }>();

/**
 * The context answering a tls-alpn-01 validation: a ClientHello whose only
 * ALPN protocol is `acme-tls/1`, for a name with a pending challenge.
 */
export function alpnChallengeContext(hello: ClientHello | undefined): tls.SecureContext | undefined {
  if (!store || !hello?.serverName || hello.alpn.length !== 1 || hello.alpn[0] !== ACME_TLS_ALPN) return undefined;
  const name = hello.serverName.toLowerCase();
  const cert = entries(ALPN_CHALLENGES)[name] as RuntimeCertificate | undefined;
  if (!cert) return undefined;
  let c = challengeContexts.get(name);
  if (c?.pem !== cert.certPem) {
    c = { pem: cert.certPem, context: tls.createSecureContext({ cert: cert.certPem, key: cert.keyPem, minVersion: 'TLSv1.2' }) };
    challengeContexts.set(name, c);
  }
  return c.context;
}
