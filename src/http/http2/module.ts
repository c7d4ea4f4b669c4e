/**
 * ngx_http_v2_module: `http2 on|off`, the `http2_*` settings and `$http2`.
 * HTTP/2 runs on TLS listeners, chosen by ALPN (`listen … ssl http2` or
 * `http2 on` in the server selected by SNI), and without TLS on `listen …
 * http2` addresses for clients that start with the HTTP/2 preface (h2c);
 * see src/http/http2.ts.
 */
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx, HTTP_ANY } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { flagArg, msecArg, sizeArg } from '../../conf/values.ts';
import { setting } from '../../conf/setters.ts';
import type { HttpModule } from '../http-conf.ts';

export interface Http2SrvConf {
  enable?: boolean;
  maxConcurrentStreams?: number;
  chunkSize?: number;
  bodyPrereadSize?: number;
  recvTimeout?: number;
  idleTimeout?: number;
  maxFieldSize?: number;
  maxHeaderSize?: number;
}

export const HTTP2_DEFAULTS = {
  enable: false,
  maxConcurrentStreams: 128,
  chunkSize: 8 * 1024,
  bodyPrereadSize: 64 * 1024,
  recvTimeout: 30_000,
} as const satisfies Http2SrvConf;

export const http2Srv = defineSlot<Http2SrvConf, typeof HTTP2_DEFAULTS>('http_v2_srv', () => ({}), inheritUnset, HTTP2_DEFAULTS);

function row<K extends keyof Http2SrvConf>(name: string, field: K, parse: (cf: ConfContext, v: string) => Http2SrvConf[K], contexts = Ctx.HTTP | Ctx.SERVER): Directive {
  return { name, contexts, args: 1, handler: setting(http2Srv, field, parse) };
}

const number = (cf: ConfContext, v: string): number => {
  if (!/^\d+$/.test(v)) throw cf.error(`invalid number "${v}"`);
  return Number(v);
};

/** Directives nginx still accepts but that do nothing (obsolete or server push). */
function ignored(name: string, contexts = HTTP_ANY): Directive {
  return { name, contexts, args: 1, handler() { /* accepted, no effect */ } };
}

export const http2Module: HttpModule = {
  name: 'ngx_http_v2_module',
  directives: [
    row('http2', 'enable', flagArg),
    row('http2_max_concurrent_streams', 'maxConcurrentStreams', number),
    row('http2_chunk_size', 'chunkSize', sizeArg, HTTP_ANY),
    row('http2_body_preread_size', 'bodyPrereadSize', sizeArg),
    row('http2_recv_timeout', 'recvTimeout', msecArg),
    row('http2_idle_timeout', 'idleTimeout', msecArg),
    row('http2_max_field_size', 'maxFieldSize', sizeArg),
    row('http2_max_header_size', 'maxHeaderSize', sizeArg),
    ignored('http2_recv_buffer_size', Ctx.HTTP),
    ignored('http2_max_requests', Ctx.HTTP | Ctx.SERVER),
    ignored('http2_push'),
    ignored('http2_push_preload'),
    ignored('http2_max_concurrent_pushes', Ctx.HTTP | Ctx.SERVER),
  ],
  variables: [
    { name: 'http2', get: (r) => (r.httpVersion !== '2.0' ? '' : r.conn.tls ? 'h2' : 'h2c') },
  ],
};
