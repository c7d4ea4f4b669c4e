/**
 * ngx.req.socket() and ngx.req.socket(true): the request socket as a TCP
 * cosocket of api-socket-tcp.ts (its receive family, settimeout(s) and, for
 * the raw one, send), over a different stream. The plain one reads the
 * request body from the request's body source (Content-Length bounds it; a
 * chunked body is refused, as OpenResty 0.10.23 refuses it); the raw one
 * takes the client's connection from the HTTP reader (what the client sent
 * that nobody read, then what comes) and writes to it straight: no head
 * goes out from then on, ngx.say and friends are refused, and the
 * connection closes after the request. Checks and messages are
 * ngx_http_lua_req_socket's in 0.10.23.
 */
import { LuaError } from '../../../lua/bridge.ts';
import { LogLevel } from '../../../core/error-log.ts';
import { bodyTaken, claimRequestBody, isChunked } from '../../request-body.ts';
import type { BodyListener } from '../../request-body-source.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import { luaLoc } from './conf.ts';
import { rawOutput, rawRefusal, takeRawOutput } from './output.ts';
import { refuseIn, requestContext } from './runtime.ts';
import type { HookContext, LuaRuntime } from './runtime.ts';
import { objectId, pushFailure } from './socket-lifetime.ts';
import { CosocketStream } from './socket-stream.ts';
import type { TcpCosocket } from './api-socket-tcp.ts';

/** Bytes a request socket holds before it stops taking more from the client (until a read takes some). */
const HOLD = 64 * 1024;

/** How api-socket-tcp.ts gives a new socket object (its id for Lua), and finds one. */
export interface TcpSockets {
  make(ctx: HookContext): { id: number; s: TcpCosocket };
  find(id: number): TcpCosocket | undefined;
}

export function reqSocketLibrary(rt: LuaRuntime, sockets: TcpSockets): Record<string, unknown> {
  const { bridge } = rt.vm;

  /** The body socket: the body source's bytes, as they come (the end of the body is the end of the stream). */
  const bodySocket = (r: HttpRequest, s: TcpCosocket): void => {
    const source = r.body;
    const stream = new CosocketStream(r.sink.socket!, true);
    const listener: BodyListener = {
      data(chunk) {
        r.bodyRead += chunk.length;
        stream.push(chunk);
        if (stream.buffered >= HOLD) source.pause();
      },
      end() { stream.finish(undefined); },
      // the client went away before the whole body came
      error() {
        stream.endError = 'client aborted';
        stream.finish(undefined);
      },
      announced() {},
    };
    stream.onTake = () => { if (stream.buffered < HOLD) source.resume(); };
    source.read(listener);
    s.stream = stream;
    s.release = () => source.stop(listener);
  };

  /** The raw socket: the connection's bytes from now on, and sends straight to the client. */
  const rawSocket = (r: HttpRequest, s: TcpCosocket): boolean => {
    const socket = r.sink.socket!;
    const stream = new CosocketStream(socket, true);
    let live = true;
    const early = r.conn.takeRaw(r, {
      data(chunk) {
        if (!live) return;
        stream.push(chunk);
        if (stream.buffered >= HOLD) socket.pause();
      },
      end() { stream.finish(undefined); },
    });
    if (early === undefined) return false;
    stream.push(early);
    stream.onTake = () => { if (live && stream.buffered < HOLD && socket.isPaused()) socket.resume(); };
    // with lua_check_client_abort, the client's end is `client aborted` (OpenResty's FT_CLIENTABORT)
    if (r.level.get(luaLoc).checkClientAbort) stream.endError = 'client aborted';
    s.stream = stream;
    s.release = () => { live = false; };
    return true;
  };

  return {
    /** ngx.req.socket([raw]): the socket's id and whether it is raw, or nil and OpenResty's error. */
    req_new(L: number) {
      const n = bridge.api.lua_gettop(L);
      if (n > 1) throw new LuaError(`expecting zero arguments, but got ${n}`, 2);
      const raw = n === 1 && bridge.toBoolean(L, 1);
      const ctx = requestContext(rt, 2, ['timer']);
      const r = ctx.r;
      if (r.parent) throw new LuaError('attempt to read the request body in a subrequest', 2);
      if (r.head.version >= 2000) throw new LuaError('http v2 not supported yet', 2);
      if (!raw && isChunked(r)) return pushFailure(bridge, L, 'chunked request bodies not supported yet');
      refuseIn(ctx, ['set', 'log', 'header_filter', 'body_filter'], 2);
      const taken = bodyTaken(r);
      if (raw) {
        // a body another reader has not finished (a read_body that waits, a plain request socket)
        if (taken === 'reading' || (taken === 'claimed' && !r.body.complete)) {
          return pushFailure(bridge, L, 'pending request body reading in some other thread');
        }
        const refused = rawRefusal(r);
        if (refused) return pushFailure(bridge, L, refused);
        if (rawOutput(r)) return pushFailure(bridge, L, 'duplicate call');
      } else {
        if (taken !== 'no') return pushFailure(bridge, L, 'request body already exists');
        if (r.head.contentLength <= 0) return pushFailure(bridge, L, 'no body');
      }
      const { id, s } = sockets.make(ctx);
      s.downstream = raw ? 'raw' : 'body';
      if (raw) {
        if (!rawSocket(r, s)) {
          s.close();
          return pushFailure(bridge, L, 'closed');
        }
        claimRequestBody(r, false);
        takeRawOutput(r);
      } else {
        claimRequestBody(r, true);
        bodySocket(r, s);
      }
      bridge.pushInteger(L, id);
      bridge.pushBoolean(L, raw);
      return 2;
    },
    /** The request socket object was collected: it lets its stream go, as OpenResty's __gc finalizes it. */
    req_gc(L: number) {
      const s = sockets.find(objectId(bridge, L, '__gc'));
      if (!s?.downstream || !s.stream) return 0;
      const log = requestLog(s.owner as HttpRequest);
      log.log(LogLevel.debug, 'lua finalize socket');
      s.close();
      return 0;
    },
  };
}
