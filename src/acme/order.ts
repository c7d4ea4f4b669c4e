/**
 * One certificate order (RFC 8555 §7.4): newOrder for the identifiers, each
 * authorization answered with the issuer's challenge type and kept
 * answerable until the authorization is final (validators ask from several
 * places), finalize with a CSR for a fresh key, then the certificate chain.
 * Polling backs off from ½ s to 8 s and honours Retry-After.
 */
import crypto from 'node:crypto';
import { createCsr } from '../tls/x509-builder.ts';
import { AcmeError } from './client.ts';
import type { AcmeClient, AcmeResponse } from './client.ts';
import { b64u, thumbprint } from './jws.ts';
import type { Solver } from './solvers/solver.ts';
import { identifierOf } from './identifiers.ts';
import type { Identifier } from './identifiers.ts';

const POLL_LIMIT_MS = 60_000;
/** A Retry-After longer than this is a rate limit: the order fails and is retried later. */
const INLINE_RETRY_MAX_MS = 60_000;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Fetches `url` until its status leaves `pending`/`processing` (POST-as-GET). */
async function poll(client: AcmeClient, url: string, first?: AcmeResponse): Promise<Record<string, unknown>> {
  const deadline = Date.now() + POLL_LIMIT_MS;
  let res = first ?? await client.post(url, undefined);
  let [a, b] = [250, 500];
  while (res.body.status === 'pending' || res.body.status === 'processing') {
    if (Date.now() > deadline) throw new AcmeError(`${url} is still ${String(res.body.status)} after ${POLL_LIMIT_MS / 1000}s`);
    let wait = Math.min(b, 8000);
    if (res.retryAfter !== undefined) {
      if (res.retryAfter > INLINE_RETRY_MAX_MS) throw new AcmeError(`${url}: the CA asks to retry after ${Math.round(res.retryAfter / 1000)}s`, undefined, res.retryAfter);
      wait = Math.max(wait, res.retryAfter);
    }
    await sleep(wait);
    [a, b] = [b, a + b];
    res = await client.post(url, undefined);
  }
  return res.body;
}

function problem(body: Record<string, unknown>): string {
  const err = body.error as { type?: string; detail?: string } | undefined;
  if (err) return `${err.type ?? 'error'}: ${err.detail ?? ''}`;
  const challenges = (body.challenges as Array<{ error?: { type?: string; detail?: string } }> | undefined) ?? [];
  const failed = challenges.find((c) => c.error)?.error;
  return failed ? `${failed.type ?? 'error'}: ${failed.detail ?? ''}` : `status ${String(body.status)}`;
}

export interface OrderResult {
  certPem: string;
  keyPem: string;
}

/** Orders a certificate for `names` with a new key made by `makeKey`. */
export interface OrderOptions {
  /** The CSR's subject CN is the first name (`common_name_in_csr on`). */
  commonName: boolean;
  /** `preferred_chain`: the issuer CN of the topmost certificate wanted. */
  preferredChain: string | undefined;
  /** Where notices go (a profile the CA does not offer). */
  notice(message: string): void;
  /** RFC 9773: the certID of the certificate this order renews. */
  replaces?: string;
}

export async function orderCertificate(
  client: AcmeClient, names: string[], makeKey: () => crypto.KeyObject, solver: Solver,
  { commonName, preferredChain, notice, replaces }: OrderOptions,
): Promise<OrderResult> {
  const dir = await client.directory();
  await client.account();
  const request: Record<string, unknown> = { identifiers: names.map(identifierOf) };
  const profile = client.opts.profile;
  // as nginx-acme: a required profile is always asked for, a preferred one only when the CA offers it
  if (profile && (profile.require || dir.meta?.profiles?.[profile.name] !== undefined)) request.profile = profile.name;
  else if (profile) notice(`acme profile "${profile.name}" is not supported by the server`);
  let created: AcmeResponse;
  try {
    created = await client.post(dir.newOrder, replaces && dir.renewalInfo ? { ...request, replaces } : request);
  } catch (err) {
    // as nginx-acme: a CA that refuses `replaces` (already replaced, unknown) gets the order without it
    if (!replaces || !dir.renewalInfo) throw err;
    created = await client.post(dir.newOrder, request);
  }
  const orderUrl = created.location;
  if (!orderUrl) throw new AcmeError('newOrder answered without the order URL');
  const order = created.body as { authorizations: string[]; finalize: string; status: string };
  const accountThumbprint = thumbprint(client.key);
  for (const authzUrl of order.authorizations) {
    const authzRes = await client.post(authzUrl, undefined);
    const authz = authzRes.body as { status: string; identifier: Identifier; challenges: Array<{ type: string; url: string; token: string; status: string }> };
    if (authz.status === 'valid') continue;
    const challenge = authz.challenges.find((c) => c.type === solver.type);
    if (!challenge) throw new AcmeError(`no ${solver.type} challenge offered for "${authz.identifier.value}"`);
    const keyAuthorization = `${challenge.token}.${accountThumbprint}`;
    await solver.publish(authz.identifier, challenge.token, keyAuthorization);
    try {
      if (challenge.status === 'pending') await client.post(challenge.url, {});
      const final = await poll(client, authzUrl);
      if (final.status !== 'valid') throw new AcmeError(`authorization for "${authz.identifier.value}" failed: ${problem(final)}`);
    } finally {
      await Promise.resolve(solver.remove(authz.identifier, challenge.token, keyAuthorization)).catch(() => undefined);
    }
  }
  let state = await poll(client, orderUrl);
  const key = makeKey();
  if (state.status === 'ready') {
    const csr = createCsr(key, names, commonName);
    state = await poll(client, orderUrl, await client.post(order.finalize, { csr: b64u(csr) }));
  }
  if (state.status !== 'valid' || typeof state.certificate !== 'string') throw new AcmeError(`order failed: ${problem(state)}`);
  const certPem = await downloadChain(client, state.certificate, preferredChain);
  return { certPem, keyPem: key.export({ type: 'pkcs8', format: 'pem' }) as string };
}

/** nginx-acme's preferred_chain: the chain whose topmost certificate was issued by that CN, else the default one. */
function issuedBy(pem: string, cn: string): boolean {
  const certs = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (!certs.length) return false;
  const top = new crypto.X509Certificate(certs[certs.length - 1]);
  return top.issuer.split('\n').some((line) => line === `CN=${cn}`);
}

async function downloadChain(client: AcmeClient, url: string, preferred: string | undefined): Promise<string> {
  const accept = 'application/pem-certificate-chain';
  const first = await client.post(url, undefined, accept);
  if (!first.text.includes('-----BEGIN CERTIFICATE-----')) throw new AcmeError('the certificate download is not PEM');
  if (preferred === undefined || issuedBy(first.text, preferred)) return first.text;
  for (const link of first.links) {
    if (!link.rel.includes('alternate')) continue;
    const alt = await client.post(link.url, undefined, accept);
    if (issuedBy(alt.text, preferred)) return alt.text;
  }
  return first.text;
}
