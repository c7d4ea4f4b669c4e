/**
 * ngx_http_memcached_module: `memcached_pass` answers GET and HEAD with the
 * value memcached holds under `$memcached_key`, on the upstream engine
 * (groups, keepalive, next upstream, timeouts) through the CGI family's
 * directive machinery. The request is `get <key>\r\n` (the key escaped as
 * nginx does); the answer `VALUE <key> <flags> <length>\r\n`, the value,
 * `\r\nEND\r\n` is a 200 with that length and the type of the URI
 * (`Content-Encoding: gzip` when a flag of `memcached_gzip_flag` is set);
 * `END\r\n` is nginx's 404 (intercepted as nginx does, the connection kept).
 * Unbuffered, as nginx's memcached module always is.
 */
import { defineSlot } from '../../conf/context.ts';
import { HTTP_ANY } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { unique, setting } from '../../conf/setters.ts';
import { numberArg } from '../../conf/values.ts';
import { contentTypeFor } from '../core/types.ts';
import { allowRanges } from './range.ts';
import { httpMainOf } from '../http-conf.ts';
import type { HttpMainConf, HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { FT } from '../upstream/conf.ts';
import { BODY_AGAIN, BODY_DONE } from '../upstream/protocol.ts';
import type { UpstreamBodyDecoder, UpstreamHead, UpstreamProtocol } from '../upstream/protocol.ts';
import { escapeMemcachedKey } from '../uri.ts';
import { CGI_DEFAULTS, mergeCgi } from './cgi-upstream/conf.ts';
import type { CgiDerived, CgiLoc, CgiLocConf, CgiSlot } from './cgi-upstream/conf.ts';
import { cgiDirectives, cgiHandler, finishCgi } from './cgi-upstream/module.ts';
import type { CgiModuleSpec } from './cgi-upstream/module.ts';

interface MemcachedLocConf extends CgiLocConf {
  /** memcached_gzip_flag: flag bits that mean the value is gzip-compressed (0: none). */
  gzipFlag?: number;
  /** The index of `$memcached_key`, taken by memcached_pass (an unknown variable fails the configuration, as in nginx). */
  keyIndex?: number;
}

const MEMCACHED_DEFAULTS = {
  ...CGI_DEFAULTS,
  // nginx's hard-coded values for memcached
  buffering: false, interceptErrors: true, intercept404: true, passRequestHeaders: false, passRequestBody: false,
  gzipFlag: 0,
} as const satisfies MemcachedLocConf;

const memcachedLoc = defineSlot<MemcachedLocConf, typeof MEMCACHED_DEFAULTS>('memcached_loc', () => ({}), mergeCgi, MEMCACHED_DEFAULTS);

type MemcachedLoc = CgiLoc<MemcachedLocConf>;

/** r.ctx key of the escaped key this request asked for (the answer must name it). */
const KEY = {};

const END = Buffer.from('\r\nEND\r\n', 'latin1');

/** The value's bytes, then nginx's check of the `\r\nEND\r\n` after them. */
class ValueBody implements UpstreamBodyDecoder {
  private left: number;
  private matched = 0;
  keepalive = false;
  private readonly log: (msg: string) => void;

  constructor(length: number, log: (msg: string) => void) {
    this.left = length;
    this.log = log;
  }

  feed(chunk: Buffer, out: Buffer[]): typeof BODY_AGAIN | typeof BODY_DONE | string {
    if (this.left > 0) {
      const n = Math.min(this.left, chunk.length);
      if (n > 0) out.push(chunk.subarray(0, n));
      this.left -= n;
      chunk = chunk.subarray(n);
      if (this.left > 0) return BODY_AGAIN;
    }
    // anything but the rest of the trailer (more bytes after it included) ends the body without keepalive
    if (chunk.length > END.length - this.matched || !chunk.equals(END.subarray(this.matched, this.matched + chunk.length))) {
      this.log('memcached sent invalid trailer');
      return BODY_DONE;
    }
    this.matched += chunk.length;
    if (this.matched < END.length) return BODY_AGAIN;
    this.keepalive = true;
    return BODY_DONE;
  }
}

type MemcachedUpstream = Parameters<UpstreamProtocol<MemcachedLoc, CgiDerived>['processHeader']>[0];

function head(status: number, length: number, bodyStart: number): UpstreamHead {
  return {
    status, statusLine: '', http09: false, headers: { names: [], lnames: [], values: [] }, contentLength: length,
    chunked: false, connectionClose: false, bodyStart,
  };
}

/** ngx_http_memcached_process_header: the first line of the answer. */
function processHeader(u: MemcachedUpstream, b: Buffer): UpstreamHead | undefined {
  const lf = b.indexOf(10);
  if (lf < 0) return undefined;
  const key = u.r.ctx.get(KEY) as string;
  const invalid = (message: string) => {
    u.log('error', message);
    u.invalidHeader();
    return undefined;
  };
  const line = b.toString('latin1', 0, lf > 0 && b[lf - 1] === 13 ? lf - 1 : lf);
  if (lf === 0 || b[lf - 1] !== 13) return invalid(`memcached sent invalid response: "${b.toString('latin1', 0, lf)}"`);
  if (line.startsWith('VALUE ')) {
    if (!line.startsWith(key, 6)) return invalid(`memcached sent invalid key in response "${line}" for key "${key}"`);
    let p = 6 + key.length;
    if (line[p++] !== ' ') return invalid(`memcached sent invalid response: "${line}"`);
    const space = line.indexOf(' ', p);
    if (space < 0) return invalid(`memcached sent invalid response: "${line}"`);
    let gzip = false;
    const gzipFlag = u.conf.gzipFlag;
    if (gzipFlag) {
      const flags = line.slice(p, space);
      if (!/^\d+$/.test(flags)) return invalid(`memcached sent invalid flags in response "${line}" for key "${key}"`);
      gzip = (Number(flags) & gzipFlag) !== 0;
    }
    const length = line.slice(space + 1);
    if (!/^\d+$/.test(length)) return invalid(`memcached sent invalid length in response "${line}" for key "${key}"`);
    u.r.ctx.set(GZIPPED, gzip);
    return head(200, Number(length), lf + 1);
  }
  if (line === 'END') {
    u.log('info', `key: "${key}" was not found by memcached`);
    return head(404, 0, lf + 1);
  }
  return invalid(`memcached sent invalid response: "${line}"`);
}

/** r.ctx key: the value is gzip-compressed (memcached_gzip_flag). */
const GZIPPED = {};

const protocol: UpstreamProtocol<MemcachedLoc, CgiDerived> = {
  processHeader,
  copyHeaders(u, h) {
    const r = u.r;
    if (r.ctx.get(GZIPPED) === true) r.addHeader('Content-Encoding', 'gzip');
    r.status = h.status;
    r.contentLength = h.contentLength;
    // nginx's force_ranges: Accept-Ranges as for a file; no range filter cuts a relayed body here, so a Range request gets it whole
    if (r.header('range') === undefined) allowRanges(r);
  },
  bodyDecoder: (u, h) => new ValueBody(h.contentLength, (m) => u.log('error', m)),
};

const spec: CgiModuleSpec<MemcachedLocConf> = {
  prefix: 'memcached_',
  schema: 'memcached://',
  slot: memcachedLoc as CgiSlot<MemcachedLocConf>,
  protocol: protocol as CgiModuleSpec<MemcachedLocConf>['protocol'],
  streamsChunked: false,
  head(r, conf) {
    const v = conf.keyIndex === undefined ? undefined : r.main.variables.value(r, conf.keyIndex);
    if (!v) {
      requestLog(r).error('the "$memcached_key" variable is not set');
      return 500;
    }
    const key = escapeMemcachedKey(v);
    r.ctx.set(KEY, key);
    return `get ${key}\r\n`;
  },
};

const cgiContent = cgiHandler(spec);

/** ngx_http_memcached_handler: GET and HEAD only; the type is the URI's. */
async function memcachedHandler(r: HttpRequest): Promise<number> {
  if (r.method !== 'GET' && r.method !== 'HEAD') return 405;
  r.contentType = contentTypeFor(r);
  return cgiContent(r);
}

const NEXT: Record<string, number> = { error: FT.ERROR, timeout: FT.TIMEOUT, invalid_response: FT.INVALID_HEADER, not_found: FT.HTTP_404, off: FT.OFF };

/** The directives nginx's memcached module has (the engine's rows it shares, its own next_upstream words). */
const OWN = new Set(['pass', 'bind', 'socket_keepalive', 'connect_timeout', 'send_timeout', 'read_timeout', 'buffer_size',
  'next_upstream_tries', 'next_upstream_timeout'].map((n) => 'memcached_' + n));

const target = memcachedLoc as unknown as CgiSlot<MemcachedLocConf>;

/** memcached_pass is the CGI family's `*_pass` (no variables in nginx's), which also takes `$memcached_key`'s index. */
function withKeyIndex(d: Directive): Directive {
  if (d.name !== 'memcached_pass') return d;
  return {
    ...d,
    handler(cf, node) {
      const rc = d.handler(cf, node);
      if (rc === undefined) cf.get(memcachedLoc).keyIndex = httpMainOf(cf).variables.index('memcached_key');
      return rc;
    },
  };
}

const directives: Directive[] = [
  ...cgiDirectives(spec, memcachedHandler).filter((d) => OWN.has(d.name)).map(withKeyIndex),
  {
    name: 'memcached_next_upstream', contexts: HTTP_ANY, args: [1, Infinity],
    handler: unique(target, 'nextUpstream', (cf, node, c) => {
      let mask = 0;
      for (const w of node.args) {
        const bit = NEXT[w.toLowerCase()];
        if (bit === undefined) throw cf.error(`invalid value "${w}"`);
        mask |= bit;
      }
      c.nextUpstream = mask & FT.OFF ? FT.OFF : mask;
    }),
  },
  { name: 'memcached_gzip_flag', contexts: HTTP_ANY, args: 1, handler: setting(memcachedLoc, 'gzipFlag', numberArg) },
];

export const memcachedModule: HttpModule = {
  name: 'ngx_http_memcached_module',
  directives,
  postconfiguration: (http: HttpMainConf, cf) => finishCgi(spec, http, cf),
};
