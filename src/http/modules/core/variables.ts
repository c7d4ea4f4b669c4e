/**
 * ngx_http_core_module's variables ($host, $uri, $args, $http_*, $remote_addr, ...)
 * and ngx_http_log_module's time variables.
 */
import crypto from 'node:crypto';
import os from 'node:os';
import type { HttpRequest } from '../../request.ts';
import { NGINX_VERSION } from '../../special-response.ts';
import type { VariableDef, VarValue } from '../../variables.ts';
import { coreLoc } from './settings.ts';
import { rootVariables } from './root.ts';

/** `$http_x_forwarded_for` → `x-forwarded-for`. */
function headerName(name: string, prefix: string): string {
  return name.slice(prefix.length).replace(/_/g, '-');
}

/** Request header value; several headers of one name join as nginx does (`, `, or `; ` for cookies). */
function requestHeader(r: HttpRequest, name: string): VarValue {
  const raw = r.req.rawHeaders;
  let value: string | undefined;
  const sep = name === 'cookie' ? '; ' : ', ';
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i].length === name.length && raw[i].toLowerCase() === name) {
      value = value === undefined ? raw[i + 1] : value + sep + raw[i + 1];
    }
  }
  return value;
}

function argValue(args: string, name: string): VarValue {
  if (!args) return undefined;
  const lower = name.toLowerCase();
  for (const part of args.split('&')) {
    const eq = part.indexOf('=');
    const k = eq >= 0 ? part.slice(0, eq) : part;
    if (k.toLowerCase() === lower) return eq >= 0 ? part.slice(eq + 1) : '';
  }
  return undefined;
}

function cookieValue(r: HttpRequest, name: string): VarValue {
  const header = requestHeader(r, 'cookie');
  if (!header) return undefined;
  for (const part of header.split(/;\s*|,\s*/)) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1);
  }
  return undefined;
}

function pad(n: number, w = 2): string {
  return String(n).padStart(w, '0');
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

function tzOffset(d: Date, colon: boolean): string {
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? '+' : '-';
  const a = Math.abs(off);
  return `${sign}${pad(Math.floor(a / 60))}${colon ? ':' : ''}${pad(a % 60)}`;
}

export function timeLocal(d = new Date()): string {
  return `${pad(d.getDate())}/${MONTHS[d.getMonth()]}/${d.getFullYear()}:${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} ${tzOffset(d, false)}`;
}

export function timeIso8601(d = new Date()): string {
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}${tzOffset(d, true)}`;
}

/** Seconds with millisecond resolution, as nginx prints times (`0.012`). */
export function msecText(ms: number): string {
  return (Math.max(0, ms) / 1000).toFixed(3);
}


const hostname = os.hostname();

export const coreVariables: VariableDef[] = [
  { name: 'http_', prefix: true, get: (r, n) => requestHeader(r, headerName(n, 'http_')) },
  { name: 'arg_', prefix: true, get: (r, n) => argValue(r.args, n.slice(4)) },
  { name: 'cookie_', prefix: true, get: (r, n) => cookieValue(r, n.slice(7)) },
  {
    name: 'sent_http_', prefix: true, noCache: true,
    get(r, n) {
      const h = headerName(n, 'sent_http_');
      if (h === 'content-type') return r.contentType;
      if (h === 'content-length') return r.contentLength !== undefined ? String(r.contentLength) : undefined;
      if (h === 'location') return r.location;
      if (h === 'last-modified') return r.lastModified !== undefined ? new Date(r.lastModified).toUTCString() : undefined;
      if (h === 'connection') return r.res.headersSent ? (r.res.shouldKeepAlive ? 'keep-alive' : 'close') : undefined;
      const found = r.headersOut.filter((x) => x.name.toLowerCase() === h);
      return found.length ? found.map((x) => x.value).join(h === 'set-cookie' ? '; ' : ', ') : undefined;
    },
  },
  { name: 'host', get: (r) => r.host || r.server.primaryName },
  { name: 'uri', noCache: true, get: (r) => r.uri },
  { name: 'document_uri', noCache: true, get: (r) => r.uri },
  { name: 'request_uri', get: (r) => r.requestUri },
  {
    name: 'args', noCache: true, get: (r) => r.args,
    set(r, v) { r.args = v; r.hasArgs = v !== ''; },
  },
  {
    name: 'query_string', noCache: true, get: (r) => r.args,
    set(r, v) { r.args = v; r.hasArgs = v !== ''; },
  },
  { name: 'is_args', noCache: true, get: (r) => (r.args ? '?' : '') },
  { name: 'remote_addr', get: (r) => r.conn.remoteAddress },
  { name: 'remote_port', get: (r) => (r.conn.remotePort ? String(r.conn.remotePort) : '') },
  { name: 'server_addr', get: (r) => r.conn.localAddress },
  { name: 'server_port', get: (r) => (r.conn.localPort ? String(r.conn.localPort) : '') },
  { name: 'server_name', get: (r) => r.server.primaryName },
  { name: 'server_protocol', get: (r) => `HTTP/${r.httpVersion}` },
  { name: 'scheme', get: (r) => (r.conn.tls ? 'https' : 'http') },
  { name: 'https', get: (r) => (r.conn.tls ? 'on' : '') },
  { name: 'request_method', noCache: true, get: (r) => r.method },
  { name: 'request', get: (r) => `${r.req.method} ${r.requestUri} HTTP/${r.httpVersion}` },
  { name: 'status', noCache: true, get: (r) => String(r.res.headersSent ? r.res.statusCode : r.status || 0).padStart(3, '0') },
  { name: 'body_bytes_sent', noCache: true, get: (r) => String(r.bodyBytesSent) },
  {
    name: 'bytes_sent', noCache: true,
    get: (r) => String((r.conn.socket.bytesWritten ?? 0) - (r.ctx.get(BYTES_AT_START) as number ?? 0)),
  },
  { name: 'request_length', noCache: true, get: (r) => String(r.req.socket.bytesRead ?? 0) },
  { name: 'request_time', noCache: true, get: (r) => msecText(Number(process.hrtime.bigint() - r.startHr) / 1e6) },
  { name: 'msec', noCache: true, get: () => (Date.now() / 1000).toFixed(3) },
  { name: 'time_local', noCache: true, get: () => timeLocal() },
  { name: 'time_iso8601', noCache: true, get: () => timeIso8601() },
  { name: 'pid', get: () => String(process.pid) },
  { name: 'hostname', get: () => hostname },
  { name: 'connection', get: (r) => String(r.conn.number) },
  { name: 'connection_requests', get: (r) => String(r.conn.requests) },
  { name: 'nginx_version', get: () => NGINX_VERSION },
  { name: 'content_length', get: (r) => r.header('content-length') },
  { name: 'content_type', get: (r) => r.header('content-type') },
  { name: 'request_id', get: () => crypto.randomBytes(16).toString('hex') },
  ...rootVariables,
  { name: 'binary_remote_addr', get: (r) => r.conn.remoteAddress },
  { name: 'limit_rate', noCache: true, get: (r) => String(r.level.get(coreLoc).limitRate ?? 0) },
];

/** Socket bytes written before this request's response, for $bytes_sent. */
export const BYTES_AT_START = {};
