/**
 * ACME Renewal Information (RFC 9773): the CA's suggested renewal window
 * for a certificate, asked at `renewalInfo/<certID>`, where the certID is
 * base64url(authorityKeyIdentifier) "." base64url(serial number), and
 * sent back as `replaces` on the order that renews it. The answer is asked
 * again after its Retry-After, kept between 1 minute and 24 hours (6 hours
 * when the CA gives none), as nginx-acme does.
 */
import type crypto from 'node:crypto';
import { derChildren, oidText, readDer } from '../tls/der.ts';
import type { AcmeClient } from './client.ts';
import { AcmeError } from './client.ts';
import { b64u } from './jws.ts';

const MIN_POLL_MS = 60_000;
const MAX_POLL_MS = 86_400_000;
const DEFAULT_POLL_MS = 6 * 3_600_000;

/** RFC 9773 §4.1's certificate identifier, or undefined without an authority key identifier. */
export function certId(leaf: crypto.X509Certificate): string | undefined {
  const [cert] = readDer(leaf.raw);
  const tbs = derChildren(derChildren(cert)[0]);
  const serial = tbs[tbs[0].tag === 0xa0 ? 1 : 0];
  const extensions = tbs.find((el) => el.tag === 0xa3);
  if (!extensions) return undefined;
  for (const ext of derChildren(derChildren(extensions)[0])) {
    const parts = derChildren(ext);
    if (oidText(parts[0].value) !== '2.5.29.35') continue;
    const [aki] = readDer(parts[parts.length - 1].value);
    const keyId = derChildren(aki).find((el) => el.tag === 0x80);
    return keyId ? `${b64u(keyId.value)}.${b64u(serial.value)}` : undefined;
  }
  return undefined;
}

export interface RenewalInfo {
  start: number;
  end: number;
  /** When to ask again (ms from now). */
  pollMs: number;
  explanationURL?: string;
}

export async function fetchRenewalInfo(client: AcmeClient, base: string, id: string): Promise<RenewalInfo> {
  const res = await client.get(`${base.replace(/\/$/, '')}/${id}`);
  const w = res.body.suggestedWindow as { start?: string; end?: string } | undefined;
  const start = Date.parse(w?.start ?? '');
  const end = Date.parse(w?.end ?? '');
  if (res.status !== 200 || Number.isNaN(start) || Number.isNaN(end) || end < start) {
    throw new AcmeError(`renewal information: HTTP ${res.status}, no suggested window`, undefined, res.retryAfter);
  }
  const pollMs = Math.min(MAX_POLL_MS, Math.max(MIN_POLL_MS, res.retryAfter ?? DEFAULT_POLL_MS));
  return { start, end, pollMs, explanationURL: typeof res.body.explanationURL === 'string' ? res.body.explanationURL : undefined };
}
