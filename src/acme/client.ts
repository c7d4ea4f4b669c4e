/**
 * The ACME protocol client (RFC 8555): the directory, replay nonces, signed
 * requests with the account key, the account itself. Requests go out with
 * node:https, trusting `ssl_trusted_certificate` (or the system's CAs), so
 * each issuer has its own trust. Errors keep the CA's problem document and
 * its Retry-After, which the scheduler honours.
 */
import type crypto from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { externalAccountBinding, signRequest } from './jws.ts';

export interface IssuerOptions {
  uri: string;
  /** PEM of the CAs trusted for the ACME server; undefined: the system's. */
  trusted?: string;
  verify: boolean;
  contacts: string[];
  eab?: { kid: string; key: Buffer };
  acceptTos: boolean;
  profile?: { name: string; require: boolean };
  /** Resolves the ACME server's name (the http block's `resolver`); undefined: the system resolver. */
  resolve?: (host: string) => Promise<string[]>;
}

export interface Directory {
  newNonce: string;
  newAccount: string;
  newOrder: string;
  /** RFC 9773's renewal information resource. */
  renewalInfo?: string;
  meta?: { termsOfService?: string; externalAccountRequired?: boolean; profiles?: Record<string, string> };
}

export interface AcmeResponse {
  status: number;
  location: string | undefined;
  retryAfter: number | undefined;
  /** Link URLs by relation (`alternate` certificate chains, `up`, `index`). */
  links: Array<{ url: string; rel: string[] }>;
  body: Record<string, unknown>;
  text: string;
}

/** A failed request: the CA's problem (type, detail) and when it asks us to come back. */
export class AcmeError extends Error {
  readonly type: string | undefined;
  /** Milliseconds the CA asked to wait (Retry-After). */
  readonly retryAfter: number | undefined;

  constructor(message: string, type?: string, retryAfter?: number) {
    super(message);
    this.type = type;
    this.retryAfter = retryAfter;
  }
}

const TIMEOUT_MS = 30_000;

/** Retry-After: seconds or an HTTP date; milliseconds from now. */
export function parseRetryAfter(v: string | undefined): number | undefined {
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : Math.max(0, t - Date.now());
}

type LookupCallback = (err: Error | null, address: string | Array<{ address: string; family: number }>, family?: number) => void;

/** A node:net `lookup` answering from `resolve` (the first address, or all of them when asked). */
function lookupWith(resolve: (host: string) => Promise<string[]>): NonNullable<https.RequestOptions['lookup']> {
  return ((host: string, options: { all?: boolean }, cb: LookupCallback) => {
    resolve(host).then((addrs) => {
      if (!addrs.length) throw new Error(`${host} could not be resolved`);
      const list = addrs.map((address) => ({ address, family: net.isIP(address) }));
      if (options.all) cb(null, list);
      else cb(null, list[0].address, list[0].family);
    }).catch((err: Error) => cb(err, ''));
  }) as unknown as NonNullable<https.RequestOptions['lookup']>;
}

/** RFC 8288 Link header values (Node joins repeated headers with `, `). */
export function parseLinks(value: string | string[] | undefined, base: string): Array<{ url: string; rel: string[] }> {
  const out: Array<{ url: string; rel: string[] }> = [];
  for (const v of [value ?? []].flat()) {
    for (const m of v.matchAll(/<([^>]*)>([^<]*)/g)) {
      const rel = /;\s*rel\s*=\s*(?:"([^"]*)"|([^\s;,]+))/i.exec(m[2]);
      if (!rel) continue;
      try {
        out.push({ url: new URL(m[1], base).href, rel: (rel[1] ?? rel[2]).split(/\s+/) });
      } catch { /* not a URL */ }
    }
  }
  return out;
}

export class AcmeClient {
  readonly opts: IssuerOptions;
  readonly key: crypto.KeyObject;
  private dir: Directory | undefined;
  private nonces: string[] = [];
  /** The account URL (the `kid` of later requests). */
  kid: string | undefined;

  constructor(opts: IssuerOptions, key: crypto.KeyObject) {
    this.opts = opts;
    this.key = key;
  }

  private send(method: string, url: string, body?: string, accept = 'application/json'): Promise<AcmeResponse> {
    return new Promise((resolve, reject) => {
      const u = new URL(url);
      const headers: Record<string, string> = { 'user-agent': 'gatehouse-acme', accept };
      if (body !== undefined) headers['content-type'] = 'application/jose+json';
      const options: https.RequestOptions = { method, headers, timeout: TIMEOUT_MS, ca: this.opts.trusted, rejectUnauthorized: this.opts.verify };
      const names = this.opts.resolve;
      if (names && net.isIP(u.hostname.replace(/^\[|\]$/g, '')) === 0) options.lookup = lookupWith(names);
      const req = (u.protocol === 'http:' ? http : https).request(u, options, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const nonce = res.headers['replay-nonce'];
          if (typeof nonce === 'string') this.nonces.push(nonce);
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: Record<string, unknown> = {};
          if (/json/.test(String(res.headers['content-type']))) {
            try { parsed = JSON.parse(text) as Record<string, unknown>; } catch { /* left empty */ }
          }
          resolve({
            status: res.statusCode ?? 0,
            location: typeof res.headers.location === 'string' ? new URL(res.headers.location, url).href : undefined,
            retryAfter: parseRetryAfter(res.headers['retry-after'] as string | undefined),
            links: parseLinks(res.headers.link, url),
            body: parsed,
            text,
          });
        });
      });
      req.on('timeout', () => req.destroy(new Error(`request to ${url} timed out`)));
      req.on('error', reject);
      req.end(body);
    });
  }

  /** An unauthenticated GET (renewal information). */
  get(url: string): Promise<AcmeResponse> {
    return this.send('GET', url);
  }

  async directory(): Promise<Directory> {
    if (this.dir) return this.dir;
    const res = await this.send('GET', this.opts.uri);
    if (res.status !== 200 || typeof res.body.newOrder !== 'string') {
      throw new AcmeError(`cannot read the directory ${this.opts.uri}: HTTP ${res.status}${res.body.newOrder ? '' : ', not an ACME directory'}`, undefined, res.retryAfter);
    }
    this.dir = res.body as unknown as Directory;
    return this.dir;
  }

  private async nonce(): Promise<string> {
    const n = this.nonces.pop();
    if (n) return n;
    const res = await this.send('HEAD', (await this.directory()).newNonce);
    const got = this.nonces.pop();
    if (!got) throw new AcmeError(`no nonce from ${this.opts.uri}: HTTP ${res.status}`, undefined, res.retryAfter);
    return got;
  }

  /** A signed POST (POST-as-GET when `payload` is undefined); a badNonce is retried (up to 5 times). */
  async post(url: string, payload: unknown, accept?: string): Promise<AcmeResponse> {
    for (let attempt = 0; ; attempt++) {
      const body = signRequest(this.key, url, await this.nonce(), payload, this.kid);
      const res = await this.send('POST', url, body, accept);
      if (res.status < 400) return res;
      const type = typeof res.body.type === 'string' ? res.body.type : undefined;
      if (type === 'urn:ietf:params:acme:error:badNonce' && attempt < 5) continue;
      const detail = typeof res.body.detail === 'string' ? res.body.detail : res.text.slice(0, 200);
      throw new AcmeError(`${url}: HTTP ${res.status}${type ? ` ${type}` : ''}: ${detail}`, type, res.retryAfter);
    }
  }

  private accountLookup: Promise<string> | undefined;

  /** Finds or creates the account for the key (newAccount), with the external account binding when configured; orders running side by side share one lookup. */
  account(): Promise<string> {
    this.accountLookup ??= this.newAccount();
    // a failed lookup is tried again by the next order
    this.accountLookup.catch(() => { this.accountLookup = undefined; });
    return this.accountLookup;
  }

  private async newAccount(): Promise<string> {
    const dir = await this.directory();
    const payload: Record<string, unknown> = { termsOfServiceAgreed: this.opts.acceptTos };
    if (this.opts.contacts.length) payload.contact = this.opts.contacts;
    if (this.opts.eab) payload.externalAccountBinding = externalAccountBinding(this.key, this.opts.eab.kid, this.opts.eab.key, dir.newAccount);
    let res: AcmeResponse;
    try {
      res = await this.post(dir.newAccount, payload);
    } catch (err) {
      const tos = dir.meta?.termsOfService;
      if (tos && !this.opts.acceptTos) throw new AcmeError(`${(err as Error).message} (terms of service: ${tos}; "accept_terms_of_service" accepts them)`, (err as AcmeError).type);
      throw err;
    }
    if (!res.location) throw new AcmeError('newAccount answered without the account URL');
    this.kid = res.location;
    return this.kid;
  }
}
