/**
 * etcd v3's JSON API (its gRPC gateway, `/v3/kv/range`, `/v3/watch`...)
 * over node:http(s), the API APISIX's lua-resty-etcd speaks too. Keys and
 * values travel base64-encoded, 64-bit numbers as decimal strings.
 *
 * Several endpoints (`deployment.etcd.host`): a request goes to the one
 * that answered last and moves on to the next when it cannot connect; an
 * answer from etcd (even an error) ends the request. With `user`/`password`
 * a token from `/v3/auth/authenticate` goes in `Authorization`, taken again
 * when etcd says it expired.
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { StoreError } from './store.ts';
import type { KeyValue } from './store.ts';

export interface EtcdConnection {
  hosts: string[];
  /** Milliseconds for one request. */
  timeoutMs: number;
  user?: string;
  password?: string;
  tls?: { cert?: string; key?: string; ca?: string; verify: boolean; sni?: string };
}

/** An error answer of etcd itself (`{"error":..., "code":...}`): it is not retried elsewhere. */
export class EtcdApiError extends StoreError {
  readonly code: number;
  constructor(message: string, code: number) {
    super(message);
    this.code = code;
  }
}

/** gRPC status codes etcd answers with. */
export const GRPC_UNAUTHENTICATED = 16;
export const GRPC_OUT_OF_RANGE = 11;

export type Json = Record<string, any>;

export interface Stream {
  abort(): void;
}

export interface StreamHandlers {
  message(m: Json): void;
  /** The stream ended or failed (not called after abort()). */
  end(error: string): void;
}

export const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
export const unb64 = (s: string | undefined): string => (s === undefined ? '' : Buffer.from(s, 'base64').toString('utf8'));

/** The end of the range of keys starting with `prefix` (etcd's range_end: the prefix's last byte + 1). */
export function rangeEnd(prefix: string): string {
  const bytes = Buffer.from(prefix, 'utf8');
  let i = bytes.length - 1;
  while (i >= 0 && bytes[i] === 0xff) i--;
  if (i < 0) return Buffer.from([0]).toString('base64');
  const end = Buffer.from(bytes.subarray(0, i + 1));
  end[i]++;
  return end.toString('base64');
}

export function toKv(kv: Json): KeyValue {
  return { key: unb64(kv.key), value: unb64(kv.value), createRevision: Number(kv.create_revision ?? 0), modRevision: Number(kv.mod_revision ?? 0) };
}

export class EtcdHttp {
  private readonly opts: EtcdConnection;
  private readonly httpAgent = new http.Agent({ keepAlive: true });
  private readonly httpsAgent: https.Agent;
  private readonly tlsFiles: https.AgentOptions;
  private current = 0;
  private token: string | undefined;

  constructor(opts: EtcdConnection) {
    this.opts = opts;
    const t = opts.tls;
    this.tlsFiles = t ? {
      cert: t.cert === undefined ? undefined : fs.readFileSync(t.cert),
      key: t.key === undefined ? undefined : fs.readFileSync(t.key),
      ca: t.ca === undefined ? undefined : fs.readFileSync(t.ca),
      rejectUnauthorized: t.verify,
      servername: t.sni,
    } : {};
    this.httpsAgent = new https.Agent({ keepAlive: true, ...this.tlsFiles });
  }

  /** A unary call; StoreError when no endpoint could be reached, EtcdApiError for etcd's own errors. */
  async call(path: string, body: Json): Promise<Json> {
    if (this.opts.user !== undefined && this.token === undefined) await this.authenticate();
    try {
      return await this.anyHost(path, body);
    } catch (e) {
      if (!(e instanceof EtcdApiError && e.code === GRPC_UNAUTHENTICATED && this.opts.user !== undefined)) throw e;
      await this.authenticate();
      return await this.anyHost(path, body);
    }
  }

  private async authenticate(): Promise<void> {
    this.token = undefined;
    const r = await this.anyHost('/v3/auth/authenticate', { name: this.opts.user, password: this.opts.password });
    this.token = r.token as string;
  }

  private async anyHost(path: string, body: Json): Promise<Json> {
    const hosts = this.opts.hosts;
    const failures: string[] = [];
    for (let i = 0; i < hosts.length; i++) {
      const n = (this.current + i) % hosts.length;
      try {
        const r = await this.once(hosts[n], path, body);
        this.current = n;
        return r;
      } catch (e) {
        if (e instanceof EtcdApiError) throw e;
        failures.push(`${hosts[n]}: ${(e as Error).message}`);
      }
    }
    throw new StoreError(`etcd unavailable: ${failures.join('; ')}`);
  }

  private request(host: string, path: string, body: Json, timeoutMs: number): http.ClientRequest {
    const url = new URL(path, host);
    const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json' };
    if (this.token !== undefined) headers.authorization = this.token;
    const req = url.protocol === 'https:'
      ? https.request(url, { method: 'POST', headers, agent: this.httpsAgent, timeout: timeoutMs, ...this.tlsFiles })
      : http.request(url, { method: 'POST', headers, agent: this.httpAgent, timeout: timeoutMs });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs / 1000} s`)));
    req.end(JSON.stringify(body));
    return req;
  }

  private once(host: string, path: string, body: Json, retried = false): Promise<Json> {
    return new Promise((resolve, reject) => {
      const req = this.request(host, path, body, this.opts.timeoutMs);
      req.on('error', (e: NodeJS.ErrnoException) => {
        // a kept-alive connection etcd closed meanwhile (a restart): once more on a new one
        if (req.reusedSocket && e.code === 'ECONNRESET' && !retried) this.once(host, path, body, true).then(resolve, reject);
        else reject(e);
      });
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          let json: Json;
          try {
            json = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Json;
          } catch {
            reject(new Error(`unreadable answer (HTTP ${res.statusCode})`));
            return;
          }
          if (json.error !== undefined || res.statusCode !== 200) reject(new EtcdApiError(String(json.message ?? json.error ?? `HTTP ${res.statusCode}`), Number(json.code ?? 0)));
          else resolve(json);
        });
      });
    });
  }

  /**
   * A streaming call (`/v3/watch`): one JSON message a line, as they come.
   * Opened on the endpoint that answered last (a failure here makes the
   * caller retry, and the next unary call moves on if that one is down).
   */
  stream(path: string, body: Json, handlers: StreamHandlers): Stream {
    let done = false;
    const finish = (error: string): void => {
      if (done) return;
      done = true;
      req.destroy();
      handlers.end(error);
    };
    const host = this.opts.hosts[this.current];
    // no request timeout: a watch is silent while nothing changes (the caller renews idle ones)
    const req = this.request(host, path, body, 0);
    req.on('error', (e) => {
      // could not reach it: the next attempt goes to the next endpoint
      if (!done && this.opts.hosts[this.current] === host) this.current = (this.current + 1) % this.opts.hosts.length;
      finish(`${host}: ${e.message}`);
    });
    req.on('response', (res) => {
      let pending = '';
      res.setEncoding('utf8');
      res.on('data', (text: string) => {
        pending += text;
        let nl: number;
        while (!done && (nl = pending.indexOf('\n')) >= 0) {
          const line = pending.slice(0, nl).trim();
          pending = pending.slice(nl + 1);
          if (line === '') continue;
          let m: Json;
          try { m = JSON.parse(line) as Json; } catch { finish(`${host}: unreadable watch message`); return; }
          if (m.error !== undefined) {
            const e = m.error as Json;
            if (Number(e.grpc_code ?? e.http_code) === GRPC_UNAUTHENTICATED) this.token = undefined;
            finish(`${host}: ${String(e.message ?? JSON.stringify(e))}`);
            return;
          }
          handlers.message(m);
        }
      });
      res.on('error', (e) => finish(`${host}: ${e.message}`));
      res.on('end', () => {
        // a refused watch is one JSON error without a newline
        let why = 'the watch stream ended';
        try { why = String((JSON.parse(pending) as Json).error?.message ?? why); } catch { /* not JSON */ }
        finish(`${host}: ${why}`);
      });
    });
    return { abort: () => { done = true; req.destroy(); } };
  }

  /**
   * A new token before a stream, when etcd wants one: a stream does not
   * retry itself, and etcd does not answer a watch with a stale token
   * (simple tokens die with an etcd restart), it leaves it silent.
   */
  async freshToken(): Promise<void> {
    if (this.opts.user !== undefined) await this.authenticate();
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}
