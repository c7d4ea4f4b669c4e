/**
 * The machinery of the real-configurations corpus (test/conf/real-configs/):
 * reads one configuration directory into files, fills in what a test run
 * decides (ports, php-fpm, a backend, certificates), runs a request against
 * one server and reduces the answer to what must match nginx's.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import zlib from 'node:zlib';
import { rawExchange } from '../kit/client.ts';
import { parseResponse } from '../kit/client.ts';
import type { RunningServer } from '../kit/server.ts';
import { tlsExchange } from '../tls/client.ts';
import { maskNameInBody, maskNameInResponse } from '../kit/server-name.ts';

export const CORPUS_DIR = new URL('./real-configs/', import.meta.url).pathname;

/** One request of a configuration's set. */
export interface CorpusRequest {
  path: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** The %%PORT_n%% it goes to (default 8080). */
  port?: number;
  /** Over TLS, with this SNI name (and optionally only this protocol). */
  tls?: string;
  tlsVersion?: 'TLSv1.2' | 'TLSv1.3';
  /** A WebSocket upgrade: after the 101, this text is sent and its echo awaited. */
  websocket?: string;
  /** Sent this many times, one after the other (a rate-limited burst); every answer is compared. */
  repeat?: number;
  /** Sent to [::1] instead of 127.0.0.1. */
  ipv6?: boolean;
  /** A stream (TCP) exchange: these bytes are sent, the port's echo read until close. */
  tcp?: string;
}

export interface CorpusConfig {
  /** Directory under test/conf/real-configs/. */
  dir: string;
  /** What the configuration is in the style of. */
  about: string;
  php?: boolean;
  backend?: boolean;
  tls?: boolean;
  /** Needs Debian's dynamic stream module. */
  stream?: boolean;
  /** A difference from nginx too big to fix here: the configuration is skipped with this reason. */
  differs?: string;
  /** Files (under the directory) to be given a precompressed .gz sibling. */
  gzipped?: string[];
  requests: CorpusRequest[];
}

/** Values a test run decides, filled in for %%FPM%%, %%BACKEND%%, %%ECHO%%, %%CERTS%%. */
export interface Placeholders { fpm: string; backend: string; echo: string; certs: string }

/** Every file of a configuration directory, placeholders filled (ports stay for the kit). */
export function readConfig(c: CorpusConfig, p: Placeholders): { conf: string; files: Record<string, string | Buffer> } {
  const root = path.join(CORPUS_DIR, c.dir);
  const files: Record<string, string | Buffer> = {};
  for (const rel of (fs.readdirSync(root, { recursive: true }) as string[]).sort()) {
    if (!fs.statSync(path.join(root, rel)).isFile()) continue;
    files[rel] = fs.readFileSync(path.join(root, rel), 'latin1')
      .replaceAll('%%FPM%%', p.fpm).replaceAll('%%BACKEND%%', p.backend)
      .replaceAll('%%ECHO%%', p.echo).replaceAll('%%CERTS%%', p.certs);
  }
  for (const rel of c.gzipped ?? []) files[`${rel}.gz`] = zlib.gzipSync(Buffer.from(files[rel] as string, 'latin1'));
  const conf = files['nginx.conf'] as string;
  delete files['nginx.conf'];
  return { conf, files };
}

/**
 * An HTTP backend for the proxy configurations: it answers with what it was
 * sent (method, URI, the headers a proxy sets), a cacheable answer under
 * /cacheable/, a WebSocket handshake and echo on Upgrade; and a TCP echo for
 * the stream configuration.
 */
export async function startBackends(): Promise<{ backend: number; echo: number; stop(): Promise<void> }> {
  const shown = ['host', 'x-real-ip', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'connection', 'upgrade', 'content-length'];
  const web = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => { body += d.toString('latin1'); });
    req.on('end', () => {
      const seen = Object.fromEntries(shown.filter((h) => req.headers[h] !== undefined).map((h) => [h, req.headers[h]]));
      const text = `${JSON.stringify({ method: req.method, url: req.url, headers: seen, body }, null, 1)}\n`;
      const headers: Record<string, string> = { 'Content-Type': 'application/json' };
      if (req.url!.startsWith('/cacheable/')) headers['Cache-Control'] = 'public, max-age=300';
      if (req.url!.startsWith('/private/')) headers['Set-Cookie'] = 'session=abc; Path=/; HttpOnly';
      res.writeHead(req.url!.includes('/missing') ? 404 : 200, headers);
      res.end(text);
    });
  });
  web.on('upgrade', (req, socket: net.Socket) => {
    const accept = crypto.createHash('sha1').update(`${req.headers['sec-websocket-key']}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
    socket.on('data', (d) => socket.write(d));
    socket.on('end', () => socket.end());
    socket.on('error', () => undefined);
  });
  const echo = net.createServer((s) => {
    s.on('data', (d) => s.write(d));
    s.on('end', () => s.end());
    s.on('error', () => undefined);
  });
  await Promise.all([web, echo].map((srv) => new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()))));
  return {
    backend: (web.address() as net.AddressInfo).port,
    echo: (echo.address() as net.AddressInfo).port,
    async stop() {
      web.closeAllConnections();
      await Promise.all([web, echo].map((srv) => new Promise<void>((r) => srv.close(() => r()))));
    },
  };
}

/** The parts of an answer that must be the same from both servers. */
export interface Seen {
  status: number | string;
  headers: string[];
  body: string;
}

/** Headers that differ by nature: the date, the server's name, per-connection ones. */
const IGNORED = new Set(['date', 'server', 'connection', 'keep-alive']);

function raw(r: CorpusRequest): string {
  const headers = { Host: 'localhost', Connection: 'close', ...(r.headers ?? {}) };
  if (r.body !== undefined) headers['Content-Length' as keyof typeof headers] = String(Buffer.byteLength(r.body));
  return `${r.method ?? 'GET'} ${r.path} HTTP/1.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n${r.body ?? ''}`;
}

/** Reduces a response: headers sorted, Expires as its distance from Date (±2 s), bodies ungzipped, server names masked. */
export function reduce(data: Buffer, head = false, ports: number[] = []): Seen {
  if (data.length === 0) return { status: 'closed', headers: [], body: '' };
  const r = parseResponse(data, { head });
  const masked = (s: string) => ports.reduce((t, p) => t.replaceAll(`:${p}`, ':PORT'), s);
  const date = Date.parse(r.header('date') ?? '');
  const gzip = /gzip/.test(r.header('content-encoding') ?? '') && r.body.length > 0;
  const body = gzip ? zlib.gunzipSync(r.body).toString('latin1') : r.body.toString('latin1');
  // the server's name masked (a gzipped page's length is the compressed one's: left as it is)
  const named = maskNameInResponse(r.headers, gzip ? '' : body, gzip ? undefined : r.status);
  const headers = named.headers.filter(([k]) => !IGNORED.has(k.toLowerCase())).map(([k, v]) => {
    const name = k.toLowerCase();
    if (name === 'expires' && !Number.isNaN(date)) {
      const delta = (Date.parse(v) - date) / 1000;
      // a distance from now (expires 1y) is compared within 2 s; a fixed date (epoch, max) exactly
      return Math.abs(delta) < 10 * 365 * 86400 ? `expires: now${delta >= 0 ? '+' : ''}${Math.round(delta / 4) * 4}s` : `expires: ${v}`;
    }
    return masked(`${name}: ${v}`);
  })
    // nginx 1.23.4 sends a .gz of gzip_static in ranges ("Gzip static: ranges support"), Gatehouse follows it, 1.22 does not
    .filter((h) => h !== 'accept-ranges: bytes' || !/gzip/.test(r.header('content-encoding') ?? ''))
    .sort();
  return {
    status: r.status,
    headers,
    body: masked(gzip ? maskNameInBody(body) : named.body),
  };
}

/** Sends one request of the set to `srv`; one Seen per answer (several for `repeat`). */
export async function send(srv: RunningServer, r: CorpusRequest): Promise<Seen[]> {
  const port = srv.port(r.port ?? 8080);
  const ports = [...srv.ports.values()];
  if (r.tcp !== undefined) {
    return [{ status: 'tcp', headers: [], body: await tcpEcho(port, r.tcp) }];
  }
  if (r.websocket !== undefined) return [await websocket(port, r)];
  const out: Seen[] = [];
  for (let i = 0; i < (r.repeat ?? 1); i++) {
    if (r.tls !== undefined) {
      const ex = await tlsExchange(port, { request: raw(r), servername: r.tls, minVersion: r.tlsVersion, maxVersion: r.tlsVersion });
      out.push(ex.error ? { status: 'handshake failed', headers: [], body: '' }
        : { ...reduce(ex.data, r.method === 'HEAD', ports), headers: [...reduce(ex.data, r.method === 'HEAD', ports).headers, `protocol: ${ex.protocol}`] });
    } else {
      out.push(reduce((await rawExchange(port, raw(r), { host: r.ipv6 ? '::1' : '127.0.0.1' })).data, r.method === 'HEAD', ports));
    }
  }
  return out;
}

/**
 * Sends `data` (no FIN: without proxy_half_close nginx ends the session on the client's FIN, racing the
 * echo) and reads until as much came back, or, with nothing to send, until the server closes.
 */
function tcpEcho(port: number, data: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let got = '';
    const timer = setTimeout(() => { sock.destroy(); reject(new Error(`tcp: got only ${JSON.stringify(got)}`)); }, 5000);
    const done = () => { clearTimeout(timer); sock.destroy(); resolve(got); };
    sock.on('connect', () => { if (data) sock.write(data); });
    sock.on('data', (d: Buffer) => { got += d.toString('latin1'); if (data && got.length >= data.length) done(); });
    sock.on('close', done);
    sock.on('error', () => undefined);
  });
}

/** An Upgrade request: the 101's head, then the echo of `r.websocket` through the tunnel. */
function websocket(port: number, r: CorpusRequest): Promise<Seen> {
  const request = raw({ ...r, headers: {
    Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==', ...(r.headers ?? {}),
  } });
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let got = Buffer.alloc(0);
    let head: Seen | undefined;
    let headLength = 0;
    const timer = setTimeout(() => { sock.destroy(); reject(new Error(`websocket: no echo, got ${JSON.stringify(got.toString('latin1'))}`)); }, 5000);
    const done = (s: Seen) => { clearTimeout(timer); sock.destroy(); resolve(s); };
    sock.on('connect', () => sock.write(request));
    sock.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      if (!head) {
        const end = got.indexOf('\r\n\r\n');
        if (end < 0) return;
        headLength = end + 4;
        head = reduce(got.subarray(0, headLength), true);
        if (head.status !== 101) return done(reduce(got));
        sock.write(r.websocket!);
      }
      const echoed = got.subarray(headLength).toString('latin1');
      if (echoed.length >= r.websocket!.length) done({ ...head, body: echoed });
    });
    sock.on('end', () => done(head ? { ...head, body: got.subarray(headLength).toString('latin1') } : reduce(got)));
    sock.on('error', () => undefined);
  });
}
