/**
 * ngx_http_core_module's variables ($host, $uri, $args, $http_*, $remote_addr, ...)
 * and ngx_http_log_module's time variables.
 */
import { proxyProtocolTlv } from '../../core/proxy-protocol.ts';
import { currentTimeIso8601, currentTimeLocal } from '../../core/local-time.ts';
import crypto from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import type { HttpRequest } from '../request.ts';
import { NGINX_VERSION, wireStatus } from '../special-response.ts';
import { requestBodyOf } from '../request-body.ts';
import type { VarValue } from '../../core/variables.ts';
import type { HttpVariable } from '../http-conf.ts';
import { coreLoc } from './settings.ts';
import { rootVariables } from './root.ts';

/**
 * A request header by variable suffix (`x_forwarded_for`): names compare
 * lowercased with `-` read as `_`; several headers of one name join with
 * `, ` (`; ` for Cookie), as nginx does since 1.23.
 */
function requestHeader(r: HttpRequest, suffix: string): VarValue {
  const raw = r.headersIn;
  let value: string | undefined;
  const sep = suffix === 'cookie' ? '; ' : ', ';
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    if (name.length === suffix.length && headerNameIs(name, suffix)) {
      value = value === undefined ? raw[i + 1] : value + sep + raw[i + 1];
    }
  }
  return value;
}

/** The length of a body read whole, as text. */
function bodyLength(r: HttpRequest): VarValue {
  const b = requestBodyOf(r);
  return b && r.body.complete ? String(b.length) : undefined;
}

function headerNameIs(name: string, suffix: string): boolean {
  for (let i = 0; i < name.length; i++) {
    let c = name.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) c |= 0x20;
    else if (c === 0x2d) c = 0x5f;
    if (c !== suffix.charCodeAt(i)) return false;
  }
  return true;
}

/** ngx_http_arg: `name=` (case-insensitive) at the start of the arguments or after `&`. */
export function argValue(args: string, name: string): VarValue {
  if (!args || !name) return undefined;
  const lowArgs = args.toLowerCase();
  const key = name.toLowerCase() + '=';
  for (let p = lowArgs.indexOf(key); p >= 0; p = lowArgs.indexOf(key, p + 1)) {
    if (p === 0 || args[p - 1] === '&') {
      const end = args.indexOf('&', p + key.length);
      return args.slice(p + key.length, end < 0 ? args.length : end);
    }
  }
  return undefined;
}

/**
 * ngx_http_parse_multi_header_lines over the Cookie headers: `name=`
 * (case-insensitive) at the start or after `;`/`,`, the value up to `;`.
 */
export function cookieValue(r: HttpRequest, name: string): VarValue {
  const raw = r.headersIn;
  const key = name.toLowerCase();
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i].length !== 6 || raw[i].toLowerCase() !== 'cookie') continue;
    const v = raw[i + 1];
    let p = 0;
    while (p < v.length) {
      if (v.slice(p, p + key.length).toLowerCase() === key) {
        let q = p + key.length;
        while (v[q] === ' ') q++;
        if (v[q] === '=') {
          q++;
          while (v[q] === ' ') q++;
          const end = v.indexOf(';', q);
          return v.slice(q, end < 0 ? v.length : end);
        }
      }
      // the next pair: after ';' or ','
      while (p < v.length && v[p] !== ';' && v[p] !== ',') p++;
      p++;
      while (v[p] === ' ') p++;
    }
  }
  return undefined;
}

/** `$sent_http_*`: the response headers nginx keeps apart, then the list (several join with `, `). */
function sentHeader(r: HttpRequest, suffix: string): VarValue {
  switch (suffix) {
    case 'content_type': return r.contentType;
    case 'content_length':
      return r.contentLength !== undefined ? String(r.contentLength) : r.getHeader('content-length');
    case 'location': return r.location ?? r.getHeader('location');
    case 'last_modified':
      return r.lastModified !== undefined ? new Date(r.lastModified).toUTCString() : r.getHeader('last-modified');
    case 'connection': return r.status === 101 ? 'upgrade' : r.keepalive ? 'keep-alive' : 'close';
    case 'keep_alive': {
      const t = r.level.get(coreLoc).keepaliveHeader;
      return r.keepalive && t ? `timeout=${Math.floor(t)}` : undefined;
    }
    case 'transfer_encoding': return r.chunked ? 'chunked' : undefined;
  }
  let value: string | undefined;
  for (const h of r.headersOut) {
    if (h.name.length === suffix.length && headerNameIs(h.name, suffix)) {
      value = value === undefined ? h.value : value + ', ' + h.value;
    }
  }
  return value;
}

/** `$status`: the status sent (nginx's own codes as sent), 000 before one is set, 009 for HTTP/0.9. */
function statusText(r: HttpRequest): string {
  const s = r.errStatus || r.status || (r.http09 ? 9 : 0);
  return String(wireStatus(s)).padStart(3, '0');
}

/** Seconds with millisecond resolution, as nginx prints times (`0.012`). */
export function msecText(ms: number): string {
  return (Math.max(0, ms) / 1000).toFixed(3);
}

/** A port 1-65535 as given with the host (nginx's r->port), else ''. */
function requestPort(r: HttpRequest): string {
  const p = r.head.port;
  if (!/^\d{1,5}$/.test(p)) return '';
  const n = Number(p);
  return n > 0 && n < 65536 ? String(n) : '';
}


const hostname = os.hostname();

export const coreVariables: HttpVariable[] = [
  { name: 'http_', prefix: true, get: (r, n) => requestHeader(r, n.slice(5).toLowerCase()) },
  // not cached, as in nginx: `set $args` changes it
  { name: 'arg_', prefix: true, noCache: true, get: (r, n) => argValue(r.args, n.slice(4)) },
  { name: 'cookie_', prefix: true, get: (r, n) => cookieValue(r, n.slice(7)) },
  { name: 'sent_http_', prefix: true, noCache: true, get: (r, n) => sentHeader(r, n.slice(10).toLowerCase()) },
  { name: 'host', get: (r) => r.host || r.server.primaryName },
  { name: 'request_port', get: (r) => requestPort(r) },
  { name: 'is_request_port', get: (r) => (requestPort(r) ? ':' : '') },
  { name: 'uri', noCache: true, get: (r) => r.uri },
  { name: 'document_uri', noCache: true, get: (r) => r.uri },
  { name: 'request_uri', get: (r) => r.requestUri },
  {
    // nginx has no $args without a non-empty query (logged as -)
    name: 'args', noCache: true, get: (r) => (r.hasArgs || r.args ? r.args : undefined),
    set(r, v) { r.args = v; r.hasArgs = true; },
  },
  { name: 'query_string', noCache: true, get: (r) => (r.hasArgs || r.args ? r.args : undefined) },
  { name: 'is_args', noCache: true, get: (r) => (r.args ? '?' : '') },
  { name: 'remote_addr', get: (r) => r.remoteAddress },
  { name: 'remote_port', get: (r) => (r.remotePort ? String(r.remotePort) : '') },
  { name: 'binary_remote_addr', get: (r) => binaryAddress(r.remoteAddress) },
  { name: 'server_addr', get: (r) => r.conn.localAddress },
  { name: 'server_port', get: (r) => (r.conn.localPort ? String(r.conn.localPort) : '') },
  { name: 'server_name', get: (r) => r.server.primaryName },
  // as sent ("HTTP/1.0"); none for HTTP/0.9
  { name: 'server_protocol', get: (r) => r.head.protocol || undefined },
  { name: 'scheme', get: (r) => (r.conn.tls ? 'https' : 'http') },
  { name: 'https', get: (r) => (r.conn.tls ? 'on' : '') },
  // the main request's method, in a subrequest too (nginx reads r->main)
  { name: 'request_method', noCache: true, get: (r) => { let m = r; while (m.parent) m = m.parent; return m.method || undefined; } },
  { name: 'request', get: (r) => r.head.line || undefined },
  { name: 'status', noCache: true, get: statusText },
  { name: 'body_bytes_sent', noCache: true, get: (r) => String(r.sink.bodyBytesSent) },
  { name: 'bytes_sent', noCache: true, get: (r) => String(r.sink.bytesSent) },
  { name: 'request_length', noCache: true, get: (r) => String(r.requestLength) },
  { name: 'request_completion', noCache: true, get: (r) => (r.completed ? 'OK' : '') },
  { name: 'pipe', get: (r) => (r.pipelined ? 'p' : '.') },
  { name: 'remote_user', get: (r) => basicAuthUser(r) },
  // whole milliseconds, as nginx's clock counts them: a request served within one says 0.000
  { name: 'request_time', noCache: true, get: (r) => msecText(Math.floor(Number(process.hrtime.bigint() - r.startHr) / 1e6)) },
  { name: 'msec', noCache: true, get: () => (Date.now() / 1000).toFixed(3) },
  { name: 'time_local', noCache: true, get: () => currentTimeLocal() },
  { name: 'time_iso8601', noCache: true, get: () => currentTimeIso8601() },
  { name: 'pid', get: () => String(process.pid) },
  { name: 'hostname', get: () => hostname },
  { name: 'connection', get: (r) => String(r.conn.number) },
  { name: 'connection_requests', get: (r) => String(r.connectionRequests) },
  { name: 'connection_time', noCache: true, get: (r) => msecText(Date.now() - r.conn.startMs) },
  { name: 'nginx_version', get: () => NGINX_VERSION },
  // a chunked body read whole has its length then (nginx sets content_length_n), as fastcgi's CONTENT_LENGTH needs;
  // not cached, as nginx: a `set` before the body was read must not fix it empty
  { name: 'content_length', noCache: true, get: (r) => requestHeader(r, 'content_length') ?? (r.head.chunked ? bodyLength(r) : undefined) },
  { name: 'content_type', get: (r) => requestHeader(r, 'content_type') },
  { name: 'request_id', get: () => crypto.randomBytes(16).toString('hex') },
  { name: 'proxy_protocol_addr', get: (r) => r.conn.proxyProtocol?.srcAddr },
  { name: 'proxy_protocol_port', get: (r) => (r.conn.proxyProtocol ? String(r.conn.proxyProtocol.srcPort) : undefined) },
  { name: 'proxy_protocol_server_addr', get: (r) => r.conn.proxyProtocol?.dstAddr },
  { name: 'proxy_protocol_server_port', get: (r) => (r.conn.proxyProtocol ? String(r.conn.proxyProtocol.dstPort) : undefined) },
  { name: 'proxy_protocol_tlv_', prefix: true, get: (r, name) => (r.conn.proxyProtocol ? proxyProtocolTlv(r.conn.proxyProtocol, name.slice(19)) : undefined) },
  // TCP_INFO is out of Node's reach: defined (configurations use them) but not found
  ...['tcpinfo_rtt', 'tcpinfo_rttvar', 'tcpinfo_snd_cwnd', 'tcpinfo_rcv_space'].map((name) => ({ name, get: () => undefined })),
  ...rootVariables,
];

/** `$remote_user`: the user name of `Authorization: Basic ...` (not found without a `user:` part). */
function basicAuthUser(r: HttpRequest): VarValue {
  const auth = r.header('authorization');
  if (!auth || auth.length < 7 || auth.slice(0, 6).toLowerCase() !== 'basic ') return undefined;
  const decoded = Buffer.from(auth.slice(6).trim(), 'base64').toString('latin1');
  const colon = decoded.indexOf(':');
  return colon > 0 ? decoded.slice(0, colon) : undefined;
}

/** `$binary_remote_addr`: the address as 4 (IPv4) or 16 (IPv6) raw bytes. */
function binaryAddress(addr: string): string {
  if (net.isIPv4(addr)) return String.fromCharCode(...addr.split('.').map(Number));
  // a unix socket: its address text (nginx's addr_text)
  if (!net.isIPv6(addr)) return addr;
  let text = addr;
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) text = text.slice(0, v4.index) + ((+v4[1] << 8) | +v4[2]).toString(16) + ':' + ((+v4[3] << 8) | +v4[4]).toString(16);
  const [head, tail] = text.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  return groups.map((g) => { const n = parseInt(g, 16); return String.fromCharCode(n >> 8, n & 255); }).join('');
}
