/**
 * OCSP stapling (`ssl_stapling`): per certificate of a server block, a
 * response fetched from the responder (the certificate's AIA or
 * `ssl_stapling_responder`) in the background and stapled once it is there
 * — a handshake never waits for it, as in nginx: the first handshakes go
 * without, the fetch starts then and is repeated before the response
 * expires (nginx's refresh: an hour, at least 5 minutes before nextUpdate;
 * 5 minutes after an error). `ssl_stapling_file` staples a stored DER
 * response instead, with no network at all.
 */
import crypto from 'node:crypto';
import { ConfError } from '../conf/errors.ts';
import { mainErrorLog } from '../core/error-log.ts';
import type { CertKeyPair } from './certificates.ts';
import type { ClientHello } from './client-hello.ts';
import { checkOcspResponse, fetchOcsp, ocspRequest, OcspError, parseResponder } from './ocsp-protocol.ts';
import type { Responder } from './ocsp-protocol.ts';
import { issued, ocspUrls } from './x509.ts';
import { diskFiles } from './load-files.ts';
import type { TlsFiles } from './load-files.ts';

export interface StaplingOptions {
  file?: string;
  /** Where `file` is read from (the configuration load's files). */
  files?: TlsFiles;
  responder?: string;
  verify: boolean;
  resolver?: string[];
  resolverTimeout?: number;
  /** `[warn]` lines about certificates that cannot be stapled for (logged once, by the configuration reader). */
  warn?: (message: string) => void;
}

interface Staple {
  pair: CertKeyPair;
  issuer: crypto.X509Certificate | undefined;
  responder: Responder | undefined;
  response: Buffer | undefined;
  /** Until when the response may be stapled (its nextUpdate; ms). */
  valid: number;
  /** When to fetch again (ms). */
  refresh: number;
  loading: boolean;
}

/** Signature algorithm code points by the key type they need (for guessing the certificate a handshake will use). */
function keyTypeOf(sigalg: number): string | undefined {
  const hi = sigalg >> 8;
  const lo = sigalg & 0xff;
  if (lo === 3 && hi >= 2 && hi <= 6) return 'ec';
  if (sigalg === 0x0807) return 'ed25519';
  if (sigalg === 0x0808) return 'ed448';
  if (lo === 1 || (sigalg >= 0x0804 && sigalg <= 0x0806)) return 'rsa';
  if (sigalg >= 0x0809 && sigalg <= 0x080b) return 'rsa-pss';
  return undefined;
}

export class Stapler {
  private readonly staples: Staple[] = [];
  private readonly opts: StaplingOptions;
  private readonly trusted: crypto.X509Certificate[];

  constructor(opts: StaplingOptions, pairs: CertKeyPair[], trusted: crypto.X509Certificate[]) {
    this.opts = opts;
    this.trusted = trusted;
    const fileResponse = opts.file ? readFile(opts.file, opts.files ?? diskFiles) : undefined;
    const warn = opts.warn ?? ((m: string) => mainErrorLog().warn(m));
    for (const pair of pairs) {
      const issuer = [...pair.chain, ...trusted].find((c) => issued(c, pair.leaf));
      const staple: Staple = { pair, issuer, responder: undefined, response: fileResponse, valid: Infinity, refresh: 0, loading: false };
      this.staples.push(staple);
      if (fileResponse) continue;
      if (!issuer) {
        warn(`"ssl_stapling" ignored, issuer certificate not found for certificate "${pair.certPath}"`);
        continue;
      }
      const url = opts.responder ?? ocspUrls(pair.leaf)[0];
      if (!url) {
        warn(`"ssl_stapling" ignored, no OCSP responder URL in the certificate "${pair.certPath}"`);
        continue;
      }
      const r = parseResponder(url);
      if (typeof r === 'string') throw new ConfError(r);
      staple.responder = r;
    }
  }

  /** The response to staple for a handshake with `hello` (and a fetch started if one is due). */
  stapleFor(hello: ClientHello | undefined): Buffer | undefined {
    const staple = this.pick(hello);
    if (!staple) return undefined;
    const now = Date.now();
    if (staple.responder && !staple.loading && staple.refresh <= now) void this.update(staple);
    return staple.valid >= now ? staple.response : undefined;
  }

  /** The certificate OpenSSL will present: the first client signature algorithm one of them can serve. */
  private pick(hello: ClientHello | undefined): Staple | undefined {
    if (this.staples.length <= 1 || !hello) return this.staples[0];
    for (const alg of hello.sigalgs) {
      const type = keyTypeOf(alg);
      const s = this.staples.find((st) => st.pair.leaf.publicKey.asymmetricKeyType === type);
      if (s) return s;
    }
    return this.staples[0];
  }

  private async update(staple: Staple): Promise<void> {
    staple.loading = true;
    const now = Date.now();
    try {
      const body = await fetchOcsp(staple.responder!, ocspRequest(staple.pair.leaf, staple.issuer!), this.opts);
      const result = checkOcspResponse(body, staple.pair.leaf, staple.issuer!, {
        verify: this.opts.verify, trusted: this.trusted, other: staple.pair.chain,
      });
      // nginx staples only good answers from a responder (a stored file is stapled as it is)
      if (result.status !== 'good') throw new OcspError(`certificate status "${result.status}" in the OCSP response`);
      staple.response = body;
      staple.valid = result.validUntil;
      // nginx: refresh in an hour, but at least five minutes before the response expires
      staple.refresh = Math.max(Math.min(result.validUntil - 300_000, now + 3_600_000), now + 300_000);
    } catch (err) {
      const text = err instanceof OcspError ? err.message : String(err);
      mainErrorLog().error(`${text} while requesting certificate status, responder: ${staple.responder!.host}, peer: ${staple.responder!.host}:${staple.responder!.port}, certificate: "${staple.pair.certPath}"`);
      staple.refresh = now + 300_000;
    } finally {
      staple.loading = false;
    }
  }
}

function readFile(path: string, files: TlsFiles): Buffer {
  try {
    return files.bytes(path);
  } catch (err) {
    throw new ConfError(`BIO_new_file("${path}") failed (SSL: error:80000002:system library::${(err as NodeJS.ErrnoException).code === 'EACCES' ? 'Permission denied' : 'No such file or directory'})`);
  }
}
