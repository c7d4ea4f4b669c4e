/**
 * OCSP checks of client certificates (`ssl_ocsp on|leaf`,
 * `ssl_ocsp_responder`, `ssl_ocsp_cache`): after the chain verified, each
 * certificate (or only the leaf) is asked about at its responder; a
 * revoked, unknown or unverifiable status fails the client certificate
 * (nginx: `FAILED:certificate revoked`, `FAILED:certificate status request
 * failed`, ...). Good and revoked answers are cached in the
 * `ssl_ocsp_cache` zone (shared by workers) until the response's
 * nextUpdate.
 */
import crypto from 'node:crypto';
import { ConfError } from '../conf/errors.ts';
import { mainErrorLog } from '../core/error-log.ts';
import type { ClientVerifyResult } from './verify.ts';
import { checkOcspResponse, fetchOcsp, ocspRequest, OcspError, parseResponder } from './ocsp-protocol.ts';
import type { CertStatus, Responder } from './ocsp-protocol.ts';
import { sharedSessionCache } from './session-cache.ts';
import type { SharedSessionCache } from './session-cache.ts';
import { ocspUrls, selfSigned } from './x509.ts';

export interface OcspClientOptions {
  mode: 'on' | 'leaf';
  responder?: string;
  cache?: { name: string; size: number };
  resolver?: string[];
  resolverTimeout?: number;
}

const STATUS_CODES: CertStatus[] = ['good', 'revoked', 'unknown'];

export class OcspVerifier {
  private readonly opts: OcspClientOptions;
  private readonly trusted: crypto.X509Certificate[];
  private readonly responder: Responder | undefined;
  private readonly cache: SharedSessionCache | undefined;

  constructor(opts: OcspClientOptions, trusted: crypto.X509Certificate[]) {
    this.opts = opts;
    this.trusted = trusted;
    if (opts.responder) {
      const r = parseResponder(opts.responder);
      if (typeof r === 'string') throw new ConfError(r);
      this.responder = r;
    }
    this.cache = opts.cache ? sharedSessionCache(opts.cache.name, opts.cache.size, 'ssl_ocsp_cache') : undefined;
  }

  /** Checks a verified chain (leaf first, trust anchor last). */
  async check(chain: crypto.X509Certificate[]): Promise<ClientVerifyResult> {
    const last = this.opts.mode === 'leaf' ? 1 : chain.length - 1;
    for (let i = 0; i < last && i + 1 < chain.length; i++) {
      const cert = chain[i];
      if (selfSigned(cert)) break;
      const status = await this.status(cert, chain[i + 1]);
      if (status !== 'good') {
        const reason = status === 'revoked' ? 'certificate revoked' : status === 'unknown' ? 'certificate status unknown' : 'certificate status request failed';
        return { code: 0, reason, ocspFailed: true };
      }
    }
    return { code: 0, reason: 'ok' };
  }

  private async status(cert: crypto.X509Certificate, issuer: crypto.X509Certificate): Promise<CertStatus | 'failed'> {
    const key = crypto.createHash('sha1').update(issuer.raw).update(cert.serialNumber).digest();
    const cached = this.cache?.get(key);
    if (cached) return STATUS_CODES[cached[0]] ?? 'failed';
    const url = this.responder ?? ocspUrls(cert)[0];
    const responder = typeof url === 'string' ? parseResponder(url) : url;
    if (!responder || typeof responder === 'string') {
      mainErrorLog().error(`no OCSP responder URL in certificate "${cert.subject.replace(/\n/g, ',')}"`);
      return 'failed';
    }
    try {
      const body = await fetchOcsp(responder, ocspRequest(cert, issuer), this.opts);
      const result = checkOcspResponse(body, cert, issuer, { verify: true, trusted: [...this.trusted, issuer], other: [] });
      if (this.cache && result.status !== 'unknown') {
        const until = Math.min(result.validUntil, Date.now() + 3_600_000);
        this.cache.set(key, Buffer.from([STATUS_CODES.indexOf(result.status)]), Math.floor(until / 1000));
      }
      return result.status;
    } catch (err) {
      const text = err instanceof OcspError ? err.message : String(err);
      mainErrorLog().error(`${text} while requesting certificate status, responder: ${responder.host}, peer: ${responder.host}:${responder.port}`);
      return 'failed';
    }
  }
}
