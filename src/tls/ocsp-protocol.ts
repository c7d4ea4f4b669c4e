/**
 * OCSP (RFC 6960) as nginx uses it: a request for one certificate sent with
 * HTTP GET to the responder (nginx's format: `GET /uri/<escaped base64>
 * HTTP/1.0`), and the response checked as OpenSSL's OCSP_basic_verify,
 * OCSP_resp_find_status and OCSP_check_validity (300 s leeway) do. Error
 * texts are the ones nginx logs.
 */
import crypto from 'node:crypto';
import dns from 'node:dns';
import net from 'node:net';
import { der, derChildren, oidText, readDer } from './der.ts';
import { derTime, verifyChain } from './verify.ts';
import { certFields, digestName, hasOcspSigning, issued, verifySignature } from './x509.ts';

export type CertStatus = 'good' | 'revoked' | 'unknown';

export interface OcspResult {
  status: CertStatus;
  /** nextUpdate (ms), or Infinity. */
  validUntil: number;
}

export class OcspError extends Error {}

const ssl = (code: string, text: string) => `(SSL: error:${code}:OCSP routines::${text})`;

const SHA1_ALG = der(0x30, der(0x06, Buffer.from('2b0e03021a', 'hex')), Buffer.from([0x05, 0x00]));

/** The CertID of `cert` (SHA-1, as OpenSSL's OCSP_cert_to_id). */
function certId(cert: crypto.X509Certificate, issuer: crypto.X509Certificate): Buffer {
  const nameHash = crypto.createHash('sha1').update(certFields(cert).issuer).digest();
  const keyHash = crypto.createHash('sha1').update(certFields(issuer).publicKeyBits).digest();
  return der(0x30, SHA1_ALG, der(0x04, nameHash), der(0x04, keyHash), der(0x02, certFields(cert).serial));
}

/** A DER OCSPRequest for one certificate. */
export function ocspRequest(cert: crypto.X509Certificate, issuer: crypto.X509Certificate): Buffer {
  return der(0x30, der(0x30, der(0x30, der(0x30, certId(cert, issuer)))));
}

export interface Responder {
  host: string;
  port: number;
  /** Path part (`/` by default). */
  uri: string;
}

/** Parses an `http://host[:port][/uri]` responder URL (nginx supports only http). */
export function parseResponder(url: string): Responder | string {
  const m = /^http:\/\/(\[[^\]]+\]|[^/:]+)(?::(\d+))?(\/.*)?$/i.exec(url);
  if (!/^http:\/\//i.test(url)) return `invalid URL prefix in OCSP responder "${url}"`;
  if (!m) return `invalid URL in OCSP responder "${url}"`;
  return { host: m[1].replace(/^\[|\]$/g, ''), port: m[2] ? Number(m[2]) : 80, uri: m[3] ?? '/' };
}

function escapeComponent(s: string): string {
  return s.replace(/[^A-Za-z0-9\-._~]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0'));
}

export interface FetchOptions {
  resolver?: string[];
  resolverTimeout?: number;
  timeout?: number;
}

async function resolveHost(host: string, opts: FetchOptions): Promise<string> {
  if (net.isIP(host)) return host;
  if (!opts.resolver?.length) throw new OcspError(`no resolver defined to resolve ${host}`);
  const r = new dns.promises.Resolver({ timeout: opts.resolverTimeout ?? 30_000, tries: 1 });
  r.setServers(opts.resolver.map((s) => s.replace(/^\[(.*)\]$/, '$1')));
  try {
    const [addr] = await r.resolve4(host);
    if (addr) return addr;
  } catch { /* reported below */ }
  throw new OcspError(`${host} could not be resolved (3: Host not found)`);
}

/** Asks `responder` about `request` (nginx's GET); resolves with the response body of a 200. */
export async function fetchOcsp(responder: Responder, request: Buffer, opts: FetchOptions = {}): Promise<Buffer> {
  const addr = await resolveHost(responder.host, opts);
  const path = responder.uri + (responder.uri.endsWith('/') ? '' : '/') + escapeComponent(request.toString('base64'));
  const head = `GET ${path} HTTP/1.0\r\nHost: ${responder.host}\r\n\r\n`;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const sock = net.connect({ host: addr, port: responder.port });
    sock.setTimeout(opts.timeout ?? 60_000, () => sock.destroy(new OcspError('OCSP responder timed out')));
    sock.on('connect', () => sock.write(head));
    sock.on('data', (d) => chunks.push(d));
    sock.on('error', (e) => reject(e instanceof OcspError ? e : new OcspError(`connect() failed (${(e as NodeJS.ErrnoException).code === 'ECONNREFUSED' ? '111: Connection refused' : e.message})`)));
    sock.on('close', () => {
      const all = Buffer.concat(chunks);
      // responders may end header lines with a bare LF, as nginx's parser allows
      const head = /\r?\n\r?\n/.exec(all.toString('latin1', 0, Math.min(all.length, 16384)));
      const end = head ? head.index + head[0].length : -1;
      const status = /^HTTP\/1\.\d (\d{3})/.exec(all.subarray(0, 64).toString('latin1'));
      if (!status) return reject(new OcspError('OCSP responder prematurely closed connection'));
      if (status[1] !== '200') return reject(new OcspError(`OCSP responder sent invalid "${status[0].slice(9)}" status`));
      resolve(end < 0 ? Buffer.alloc(0) : all.subarray(end));
    });
  });
}

export interface VerifyOptions {
  /** Check the signer (ssl_stapling_verify on / client OCSP); off: only find the signer and check the signature. */
  verify: boolean;
  /** Certificates trusted for the signer's chain. */
  trusted: crypto.X509Certificate[];
  /** Certificates that are trusted as signers outright (the server's own chain: OCSP_TRUSTOTHER). */
  other: crypto.X509Certificate[];
}

/** Checks a DER OCSPResponse for `cert`; throws OcspError with nginx's log text. */
export function checkOcspResponse(body: Buffer, cert: crypto.X509Certificate, issuer: crypto.X509Certificate, opts: VerifyOptions): OcspResult {
  let basic;
  try {
    const [resp] = readDer(body);
    const parts = derChildren(resp);
    const status = parts[0].value[0];
    if (status !== 0) {
      const names = ['successful', 'malformedrequest', 'internalerror', 'trylater', '', 'sigrequired', 'unauthorized'];
      throw new OcspError(`OCSP response not successful (${status}: ${names[status] ?? '(UNKNOWN)'})`);
    }
    const [bytes] = derChildren(parts[1]);
    const [, octets] = derChildren(bytes);
    [basic] = readDer(octets.value);
  } catch (err) {
    if (err instanceof OcspError) throw err;
    throw new OcspError('d2i_OCSP_RESPONSE() failed (SSL: error:0680007B:asn1 encoding routines::header too long)');
  }
  const [tbs, algorithm, signature, certsField] = derChildren(basic);
  const data = derChildren(tbs);
  let i = data[0].tag === 0xa0 ? 1 : 0;
  const responderId = data[i++];
  i++; // producedAt
  const responses = derChildren(data[i]);
  const included = certsField ? derChildren(derChildren(certsField)[0]).map((c) => new crypto.X509Certificate(c.raw)) : [];

  // the signer: by name or by key hash, among the trusted-other certificates, then the response's own
  const matches = (c: crypto.X509Certificate) => responderId.tag === 0xa1
    ? certFields(c).subject.equals(derChildren(responderId)[0].raw)
    : crypto.createHash('sha1').update(certFields(c).publicKeyBits).digest().equals(derChildren(responderId)[0].value);
  const fromOther = [...opts.other, issuer].find(matches);
  const signer = fromOther ?? included.find(matches);
  if (!signer) throw new OcspError(`OCSP_basic_verify() failed ${ssl('13800076', 'signer certificate not found')}`);
  if (!verifySignature(algorithm, tbs.raw, signature, signer.publicKey)) {
    throw new OcspError(`OCSP_basic_verify() failed ${ssl('13800075', 'signature failure')}`);
  }
  if (opts.verify && !(fromOther && opts.other.includes(fromOther))) {
    const chain = verifyChain(signer, [...included, ...opts.other], opts.trusted, 100, []);
    if (chain.result.code !== 0) {
      throw new OcspError(`OCSP_basic_verify() failed ${ssl('13800065', `certificate verify error:Verify error: ${chain.result.reason}`)}`);
    }
    const delegated = issued(issuer, signer) && hasOcspSigning(signer);
    if (signer.fingerprint256 !== issuer.fingerprint256 && !delegated) {
      throw new OcspError(`OCSP_basic_verify() failed ${ssl('13800070', 'root ca not trusted')}`);
    }
  }

  const want = certFields(cert);
  const issuerFields = certFields(issuer);
  for (const single of responses) {
    const [id, statusField, thisUpdateField, ...rest] = derChildren(single);
    const [alg, nameHash, keyHash, serial] = derChildren(id);
    const digest = digestName(oidText(derChildren(alg)[0].value)) ?? 'sha1';
    if (!serial.value.equals(want.serial)) continue;
    if (!crypto.createHash(digest).update(want.issuer).digest().equals(nameHash.value)) continue;
    if (!crypto.createHash(digest).update(issuerFields.publicKeyBits).digest().equals(keyHash.value)) continue;
    const status: CertStatus = statusField.tag === 0x80 ? 'good' : statusField.tag === 0xa1 ? 'revoked' : 'unknown';
    const now = Date.now();
    const thisUpdate = derTime(thisUpdateField);
    const next = rest.find((r) => r.tag === 0xa0);
    const nextUpdate = next ? derTime(derChildren(next)[0]) : Infinity;
    if (thisUpdate > now + 300_000) throw new OcspError(`OCSP_check_validity() failed ${ssl('13800081', 'status not yet valid')}`);
    if (nextUpdate < now - 300_000) throw new OcspError(`OCSP_check_validity() failed ${ssl('1380007D', 'status expired')}`);
    return { status, validUntil: nextUpdate };
  }
  throw new OcspError('certificate status not found in the OCSP response');
}
