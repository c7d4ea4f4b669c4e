/**
 * ngx.socket.tcp's host half (socket.lua is the Lua half): connect (pools,
 * unix sockets, names through the `resolver`), send, the receive family,
 * settimeout(s), setkeepalive, getreusedtimes, close. A call answers at
 * once when it can (a pooled connection, data already held) and otherwise
 * suspends the coroutine while Node does the I/O. Results and messages are
 * OpenResty's (`nil, "timeout", partial`, `connection refused` …).
 */
import net from 'node:net';
import { LuaError, T } from '../../../lua/bridge.ts';
import { LogLevel } from '../../../core/error-log.ts';
import { resolverFor } from '../../upstream/resolve.ts';
import { coreLoc } from '../../core/settings.ts';
import { logFor } from './runtime.ts';
import type { HookContext, LuaRuntime } from './runtime.ts';
import type { CosocketStream, ReadResult } from './socket-stream.ts';
import { park, takeIdle } from './socket-pool.ts';
import type { SocketSettings } from './socket-conf.ts';
import { objectId, own, ownerOf, pushFailure, settingsOf, socketContext, timeoutArg } from './socket-lifetime.ts';
import { noDelay, sendData } from './socket-send.ts';
import { sslHandshake } from './socket-tls.ts';
import { openStream, readConnectOptions } from './socket-connect.ts';
import { reqSocketLibrary } from './api-req-socket.ts';

export interface TcpCosocket {
  /** The main request (or the timer's run) it belongs to. */
  readonly owner: object;
  readonly settings: SocketSettings;
  /** settimeout(s)' values; 0 takes the lua_socket_*_timeout. */
  connectTimeout: number;
  sendTimeout: number;
  readTimeout: number;
  stream: CosocketStream | undefined;
  /** The pool key (connect's `pool` option or host:port). */
  key: string;
  poolSize: number | undefined;
  /** A read met the end: receive gives `closed` from then on. */
  readClosed: boolean;
  /** A read or a send waits (light threads share sockets). */
  reading: boolean;
  writing: boolean;
  /** Closed with its request: a connect finishing now must not keep the connection. */
  gone: boolean;
  /** bind()'s local address for the next connect. */
  local: { address: string; port: number | undefined } | undefined;
  untils: Map<number, { pattern: Buffer; inclusive: boolean; done: boolean }>;
  /** A request socket (ngx.req.socket): over the request body, or the raw client connection. */
  downstream?: 'body' | 'raw';
  /** A request socket's stream lets its source go (it never closes the client's connection). */
  release?: () => void;
  close(): void;
}

export function tcpLibrary(rt: LuaRuntime): Record<string, unknown> {
  const { bridge } = rt.vm;
  const { api } = bridge;
  const sockets = new Map<number, TcpCosocket>();
  let nextId = 1;
  let nextUntil = 1;

  const make = (id: number, ctx: HookContext): TcpCosocket => {
    const owner = ownerOf(ctx);
    const s: TcpCosocket = {
      owner, settings: settingsOf(ctx), connectTimeout: 0, sendTimeout: 0, readTimeout: 0, stream: undefined,
      key: '', poolSize: undefined, readClosed: false, reading: false, writing: false, local: undefined, untils: new Map(),
      gone: false,
      close() {
        s.gone = true;
        closeStream(s);
        if (sockets.get(id) === s) sockets.delete(id);
      },
    };
    sockets.set(id, s);
    own(owner, s);
    return s;
  };
  /**
   * The state of the object at argument 1. An object whose request ended is
   * a new, unconnected socket for the caller (its methods say `closed`, as
   * OpenResty's cleaned-up socket does); one connected for another request
   * is OpenResty's `bad request`.
   */
  const get = (L: number, method: string): TcpCosocket => {
    const ctx = socketContext(rt);
    const id = objectId(bridge, L, method);
    const s = sockets.get(id);
    // a timer's light threads have contexts of their own: they share the timer's sockets
    if (s && (s.owner === ownerOf(ctx) || !ctx.r)) return s;
    if (s?.stream) throw new LuaError('bad request', 1);
    s?.close();
    return make(id, ctx);
  };
  const connected = (L: number, method: string): { s: TcpCosocket; ctx: HookContext } | undefined => {
    const ctx = socketContext(rt);
    const s = get(L, method);
    return s.stream && !s.stream.socket.destroyed ? { s, ctx } : undefined;
  };
  const closeStream = (s: TcpCosocket): void => {
    if (s.downstream) {
      const release = s.release;
      s.release = undefined;
      release?.();
    } else s.stream?.socket.destroy();
    s.stream = undefined;
    s.readClosed = false;
  };
  /** A read or send on a closed socket: `nil, "closed"`, logged as OpenResty logs it (its pointers are ours: the socket's id). */
  const refuseClosed = (L: number, what: 'send' | 'receive'): number => {
    const ctx = socketContext(rt);
    const id = objectId(bridge, L, what);
    const s = sockets.get(id);
    if (s?.settings.logErrors) {
      const u = s.key ? (0x7f0000000000 + id * 0x100).toString(16).toUpperCase().padStart(16, '0') : '0'.repeat(16);
      logFor(ctx, LogLevel.error, `attempt to ${what} data on a closed socket: u:${u}, c:${'0'.repeat(16)}, ft:0 eof:0`);
    }
    return pushFailure(bridge, L, 'closed');
  };
  const readMs = (s: TcpCosocket) => s.readTimeout || s.settings.readTimeout;

  /** A read's outcome for Lua: the data, or nil, err, partial (a failure other than timeout closes the socket). */
  const pushRead = (s: TcpCosocket, L: number, r: ReadResult): number => {
    if ('data' in r) {
      bridge.pushBytes(L, r.data);
      return 1;
    }
    // a timeout leaves the connection usable (OpenResty since 0.8.8); a failure closes it; the end closes the reading
    if (r.err !== 'timeout') {
      if (s.stream?.failed) closeStream(s);
      else s.readClosed = true;
    }
    return pushFailure(bridge, L, r.err, r.partial);
  };
  const finishRead = (s: TcpCosocket, L: number, r: ReadResult | Promise<ReadResult>,
    push = (L1: number, v: ReadResult) => pushRead(s, L1, v)): number => {
    if (!(r instanceof Promise)) return push(L, r);
    // another light thread reading the same socket meanwhile gets `socket busy reading`
    s.reading = true;
    return bridge.suspend(r, (L1, v) => {
      s.reading = false;
      return push(L1, v);
    });
  };
  const onReadTimeout = (s: TcpCosocket, ctx: HookContext) => () => {
    if (s.settings.logErrors) logFor(ctx, LogLevel.error, 'lua tcp socket read timed out');
  };
  const startRead = (L: number, method: string) => {
    const c = connected(L, method);
    if (!c) return undefined;
    if (c.s.readClosed) return undefined;
    return c;
  };
  const busy = (L: number) => pushFailure(bridge, L, 'socket busy reading');
  /** close and setkeepalive wait for no one: another thread's read or send makes them fail. */
  const busyWith = (s: TcpCosocket): string | undefined =>
    (s.reading ? 'socket busy reading' : s.writing ? 'socket busy writing' : undefined);

  const pushConnected = (L: number, err: string | undefined): number => {
    if (err) return pushFailure(bridge, L, err);
    bridge.pushInteger(L, 1);
    return 1;
  };

  return {
    // ngx.req.socket's objects are sockets of this table too
    ...reqSocketLibrary(rt, { make: (ctx) => ({ id: nextId, s: make(nextId++, ctx) }), find: (id) => sockets.get(id) }),
    new(L: number) {
      const ctx = socketContext(rt, 2);
      const id = nextId++;
      make(id, ctx);
      bridge.pushInteger(L, id);
      return 1;
    },
    connect(L: number) {
      const ctx = socketContext(rt);
      const s = get(L, 'connect');
      const n = api.lua_gettop(L);
      if (n < 2 || n > 4) throw new LuaError(`ngx.socket connect: expecting 2, 3, or 4 arguments (including the object), but seen ${n}`);
      const host = bridge.toString(L, 2) ?? '';
      const unix = host.slice(0, 5).toLowerCase() === 'unix:';
      // as OpenResty reads them: the options are a last table; a port is anything numeric (also
      // "80"), and a unix path may have one too (ignored but part of the pool key)
      const optsAt = n >= 3 && bridge.type(L, n) === T.TABLE ? n : 0;
      const given = optsAt === 3 ? undefined : bridge.toNumber(L, 3);
      const port = given === undefined ? 0 : Math.trunc(given);
      if (given === undefined && !unix) return pushFailure(bridge, L, 'missing the port number');
      if (port < 0 || port > 65535) return pushFailure(bridge, L, `bad port number: ${port}`);
      const opts = optsAt ? readConnectOptions(bridge, L, optsAt) : {};
      closeStream(s);
      s.key = opts.pool ?? (given === undefined ? host : `${host}:${port}`);
      s.poolSize = opts.poolSize;
      const idle = takeIdle(s.key);
      if (idle) {
        s.stream = idle;
        bridge.pushInteger(L, 1);
        return 1;
      }
      if (unix) return bridge.suspend(openStream(s, ctx, { path: host.slice(5) }, host), pushConnected);
      const bare = host.replace(/^\[(.*)\]$/, '$1');
      if (net.isIP(bare)) return bridge.suspend(openStream(s, ctx, { host: bare, port }, `${host}:${port}`), pushConnected);
      const resolver = ctx.r && resolverFor(ctx.r);
      if (!resolver) return pushFailure(bridge, L, `no resolver defined to resolve "${host}"`);
      const lookup = resolver.resolve(host, ctx.r!.level.get(coreLoc).resolverTimeout).then(
        (ips) => openStream(s, ctx, { host: ips[0], port }, `${host}:${port}`),
        (e: { code?: number; message?: string }) => `${host} could not be resolved (${e.code ?? 0}: ${e.message ?? ''})`);
      return bridge.suspend(lookup, pushConnected);
    },
    send(L: number) {
      const c = connected(L, 'send');
      if (!c || c.s.stream!.failed) return refuseClosed(L, 'send');
      const { s, ctx } = c;
      if (s.writing) return pushFailure(bridge, L, 'socket busy writing');
      const data = sendData(bridge, L, 2);
      if (data.length === 0) return (bridge.pushInteger(L, 0), 1);
      const sock = s.stream!.socket;
      noDelay(s.stream!, ctx);
      if (sock.write(data)) return (bridge.pushInteger(L, data.length), 1);
      const ms = s.sendTimeout || s.settings.sendTimeout;
      const drained = new Promise<string | undefined>((resolve) => {
        const timer = setTimeout(() => {
          if (s.settings.logErrors) logFor(ctx, LogLevel.error, 'lua tcp socket write timed out');
          resolve('timeout');
        }, ms);
        const done = (err?: string) => {
          clearTimeout(timer);
          sock.off('drain', done);
          sock.off('close', closed);
          resolve(err);
        };
        const closed = () => done('closed');
        sock.once('drain', () => done());
        sock.once('close', closed);
      });
      s.writing = true;
      return bridge.suspend(drained, (L1, err) => {
        s.writing = false;
        if (!err) return (bridge.pushInteger(L1, data.length), 1);
        closeStream(s);
        return pushFailure(bridge, L1, err);
      });
    },
    receive(L: number) {
      const c = startRead(L, 'receive');
      if (!c) return refuseClosed(L, 'receive');
      const { s, ctx } = c;
      if (s.reading) return busy(L);
      const stream = s.stream!;
      const timeout = onReadTimeout(s, ctx);
      const t = bridge.type(L, 2);
      if (t === T.NUMBER) {
        const size = bridge.toInteger(L, 2) ?? 0;
        if (size < 0) throw new LuaError("bad argument #2 to '?' (bad pattern argument)", 0);
        if (size === 0) return (bridge.pushString(L, ''), 1);
        return finishRead(s, L, stream.readSize(size, readMs(s), timeout));
      }
      const pattern = t === T.NIL || t === T.NONE ? '*l' : bridge.toString(L, 2) ?? '';
      if (pattern.startsWith('*l')) return finishRead(s, L, stream.readLine(readMs(s), timeout));
      if (pattern.startsWith('*a')) return finishRead(s, L, stream.readAll(readMs(s), timeout));
      throw new LuaError("bad argument #2 to '?' (bad pattern argument)", 0);
    },
    receiveany(L: number) {
      const max = bridge.toInteger(L, 2);
      if (bridge.type(L, 2) !== T.NUMBER || max === undefined || max <= 0) {
        throw new LuaError("bad argument #2 to '?' (bad max argument)", 0);
      }
      const c = startRead(L, 'receiveany');
      if (!c) return refuseClosed(L, 'receive');
      if (c.s.reading) return busy(L);
      // OpenResty reads into its lua_socket_buffer_size buffer: never more than that at once
      const most = Math.min(max, c.s.settings.bufferSize);
      return finishRead(c.s, L, c.s.stream!.readAny(most, readMs(c.s), onReadTimeout(c.s, c.ctx)));
    },
    until_new(L: number) {
      const s = get(L, 'receiveuntil');
      const pattern = bridge.toBuffer(L, 2);
      if (!pattern || pattern.length === 0) throw new LuaError('pattern is empty', 2);
      let inclusive = false;
      if (bridge.type(L, 3) === T.TABLE) {
        const t = bridge.getField(L, 3, 'inclusive');
        if (t !== T.NIL && t !== T.BOOLEAN) throw new LuaError(`bad "inclusive" option value type: ${bridge.typeName(L, -1)}`, 2);
        inclusive = bridge.toBoolean(L, -1);
        api.lua_settop(L, -2);
      }
      const id = nextUntil++;
      s.untils.set(id, { pattern, inclusive, done: false });
      bridge.pushInteger(L, id);
      return 1;
    },
    until_read(L: number) {
      const c = startRead(L, 'receiveuntil');
      if (!c) return pushFailure(bridge, L, 'closed');
      const { s, ctx } = c;
      if (s.reading) return busy(L);
      const u = s.untils.get(bridge.toInteger(L, 2) ?? 0);
      if (!u) throw new LuaError('bad iterator');
      const size = bridge.type(L, 3) === T.NUMBER ? bridge.toInteger(L, 3) : undefined;
      if (size !== undefined && size <= 0) throw new LuaError(`bad argument #1 to 'iterator' (bad "size" argument)`, 2);
      if (u.done) {
        u.done = false;
        bridge.pushNil(L);
        return 1;
      }
      let found = false;
      const r = s.stream!.readUntil(u.pattern, u.inclusive, size, readMs(s), onReadTimeout(s, ctx), () => { found = true; });
      const push = (L1: number, v: ReadResult): number => {
        // with a size, the pattern ends the pieces: the next call gives nil
        if (found && size !== undefined && 'data' in v) {
          if (v.data.length === 0) return (bridge.pushNil(L1), 1);
          u.done = true;
        }
        return pushRead(s, L1, v);
      };
      return finishRead(s, L, r, push);
    },
    close(L: number) {
      const c = connected(L, 'close');
      if (!c) return pushFailure(bridge, L, 'closed');
      const inUse = busyWith(c.s);
      if (inUse) return pushFailure(bridge, L, inUse);
      closeStream(c.s);
      bridge.pushInteger(L, 1);
      return 1;
    },
    /** bind(ip [, port]): the local address of the next connect. */
    bind(L: number) {
      const n = api.lua_gettop(L);
      if (n !== 2 && n !== 3) throw new LuaError(`expecting 2 or 3 arguments, but got ${n}`);
      const s = get(L, 'bind');
      let port: number | undefined;
      if (n === 3) {
        const given = bridge.toNumber(L, 3);
        if (given === undefined) return pushFailure(bridge, L, `expecting port to be anumber but got type: ${bridge.typeName(L, 3)}`);
        port = Math.trunc(given);
        if (port < 0 || port > 65535) return pushFailure(bridge, L, `bad port number: ${port}`);
      }
      const ip = (bridge.toString(L, 2) ?? '').replace(/^\[(.*)\]$/, '$1');
      if (!net.isIP(ip)) return pushFailure(bridge, L, 'bad address');
      s.local = { address: ip, port: port || undefined };
      bridge.pushBoolean(L, true);
      return 1;
    },
    settimeout(L: number) {
      const s = get(L, 'settimeout');
      const ms = timeoutArg(bridge, L, 2);
      s.connectTimeout = s.sendTimeout = s.readTimeout = ms;
      return 0;
    },
    settimeouts(L: number) {
      const s = get(L, 'settimeouts');
      s.connectTimeout = timeoutArg(bridge, L, 2);
      s.sendTimeout = timeoutArg(bridge, L, 3);
      s.readTimeout = timeoutArg(bridge, L, 4);
      return 0;
    },
    setoption(L: number) {
      const c = connected(L, 'setoption');
      if (!c) return pushFailure(bridge, L, 'closed');
      const option = bridge.toString(L, 2) ?? '';
      const sock = c.s.stream!.socket;
      if (option === 'tcp-nodelay') sock.setNoDelay(bridge.toBoolean(L, 3));
      else if (option === 'keepalive') sock.setKeepAlive(bridge.toBoolean(L, 3));
      else if (!['reuseaddr', 'sndbuf', 'rcvbuf'].includes(option)) return pushFailure(bridge, L, 'unsupported option');
      bridge.pushBoolean(L, true);
      return 1;
    },
    setkeepalive(L: number) {
      const c = connected(L, 'setkeepalive');
      if (!c) return pushFailure(bridge, L, 'closed');
      const { s } = c;
      const inUse = busyWith(s);
      if (inUse) return pushFailure(bridge, L, inUse);
      const stream = s.stream!;
      if (stream.ended) {
        closeStream(s);
        return pushFailure(bridge, L, 'closed');
      }
      if (stream.buffered > 0) return pushFailure(bridge, L, 'unread data in buffer');
      const timeout = bridge.type(L, 2) === T.NUMBER ? timeoutArg(bridge, L, 2) : s.settings.keepaliveTimeout;
      const given = bridge.type(L, 3) === T.NUMBER ? bridge.toInteger(L, 3) ?? 0 : undefined;
      if (given !== undefined && given <= 0) throw new LuaError(`bad "pool_size" option value: ${given}`);
      s.stream = undefined;
      park(s.key, stream, timeout, s.poolSize ?? given ?? s.settings.poolSize);
      bridge.pushInteger(L, 1);
      return 1;
    },
    getreusedtimes(L: number) {
      const c = connected(L, 'getreusedtimes');
      if (!c) return pushFailure(bridge, L, 'closed');
      bridge.pushInteger(L, c.s.stream!.reused);
      return 1;
    },
    sslhandshake(L: number) {
      const c = connected(L, 'sslhandshake');
      if (!c) return pushFailure(bridge, L, 'closed');
      return sslHandshake(bridge, L, c.s, c.ctx, closeStream);
    },
  };
}
