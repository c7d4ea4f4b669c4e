/**
 * ngx.socket.udp's host half (socket.lua is the Lua half): setpeername to
 * an IP (or a name through the `resolver`), send, receive(size) of one
 * datagram (at most 65536 bytes, as OpenResty's buffer), settimeout, close.
 * Unix datagram sockets are not there (Node has none).
 */
import dgram from 'node:dgram';
import net from 'node:net';
import { LuaError, T } from '../../../lua/bridge.ts';
import { LogLevel } from '../../../core/error-log.ts';
import { resolverFor } from '../../upstream/resolve.ts';
import { coreLoc } from '../../core/settings.ts';
import { strerror } from '../../../conf/errors.ts';
import { logFor } from './runtime.ts';
import type { LuaRuntime } from './runtime.ts';
import type { SocketSettings } from './socket-conf.ts';
import { objectId, own, ownerOf, pushFailure, settingsOf, socketContext, timeoutArg } from './socket-lifetime.ts';
import { sendData } from './socket-send.ts';

const MAX_DATAGRAM = 65536;

interface UdpCosocket {
  readonly settings: SocketSettings;
  timeout: number;
  sock: dgram.Socket | undefined;
  queue: Buffer[];
  wake: (() => void) | undefined;
  gone: boolean;
  /** An error the socket reported (a refusal): the next receive gives it. */
  failed: NodeJS.ErrnoException | undefined;
  close(): void;
}

export function udpLibrary(rt: LuaRuntime): Record<string, unknown> {
  const { bridge } = rt.vm;
  const { api } = bridge;
  const sockets = new Map<number, UdpCosocket>();
  let nextId = 1;

  const get = (L: number, method: string): UdpCosocket => {
    const s = sockets.get(objectId(bridge, L, method));
    if (!s) throw new LuaError('bad request');
    return s;
  };
  const closeSock = (s: UdpCosocket) => {
    s.sock?.close();
    s.sock = undefined;
    s.queue = [];
    s.wake?.();
  };

  const open = (s: UdpCosocket, host: string, port: number): Promise<string | undefined> => new Promise((resolve) => {
    const sock = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
    sock.on('message', (m) => {
      if (s.sock !== sock) return;
      s.queue.push(m);
      s.wake?.();
    });
    // an ICMP refusal comes later as an error event: the next receive reports it
    sock.on('error', (e: NodeJS.ErrnoException) => {
      if (s.sock !== sock) return resolve(e.message);
      s.failed = e;
      s.wake?.();
    });
    sock.connect(port, host, () => {
      // closed with its request meanwhile: the socket must not stay open
      if (s.gone) {
        sock.close();
        return resolve('closed');
      }
      s.sock = sock;
      resolve(undefined);
    });
  });

  return {
    new(L: number) {
      const ctx = socketContext(rt, 2);
      const id = nextId++;
      const s: UdpCosocket = {
        settings: settingsOf(ctx), timeout: 0, sock: undefined, queue: [], wake: undefined, failed: undefined,
        gone: false,
        close() {
          s.gone = true;
          closeSock(s);
          sockets.delete(id);
        },
      };
      sockets.set(id, s);
      own(ownerOf(ctx), s);
      bridge.pushInteger(L, id);
      return 1;
    },
    setpeername(L: number) {
      const ctx = socketContext(rt);
      const s = get(L, 'setpeername');
      const n = api.lua_gettop(L);
      if (n < 2 || n > 3) throw new LuaError(`ngx.socket.udp setpeername: expecting 2 or 3 arguments (including the object), but seen ${n}`);
      const host = bridge.toString(L, 2) ?? '';
      if (host.startsWith('unix:')) return pushFailure(bridge, L, 'unix domain datagram sockets are not supported');
      const given = bridge.toNumber(L, 3);
      if (n === 3 && given === undefined) throw new LuaError(`bad argument #2 to 'setpeername' (number expected, got ${bridge.typeName(L, 3)})`);
      if (given === undefined) return pushFailure(bridge, L, 'missing the port number');
      const port = Math.trunc(given);
      if (port < 0 || port > 65535) return pushFailure(bridge, L, `bad port number: ${port}`);
      closeSock(s);
      const pushDone = (L1: number, err: string | undefined) => {
        if (err) return pushFailure(bridge, L1, err);
        bridge.pushInteger(L1, 1);
        return 1;
      };
      const bare = host.replace(/^\[(.*)\]$/, '$1');
      if (net.isIP(bare)) return bridge.suspend(open(s, bare, port), pushDone);
      const resolver = ctx.r && resolverFor(ctx.r);
      if (!resolver) return pushFailure(bridge, L, `no resolver defined to resolve "${host}"`);
      const lookup = resolver.resolve(host, ctx.r!.level.get(coreLoc).resolverTimeout).then(
        (ips) => open(s, ips[0], port),
        (e: { code?: number; message?: string }) => `${host} could not be resolved (${e.code ?? 0}: ${e.message ?? ''})`);
      return bridge.suspend(lookup, pushDone);
    },
    send(L: number) {
      socketContext(rt);
      const s = get(L, 'send');
      if (!s.sock) return pushFailure(bridge, L, 'closed');
      s.sock.send(sendData(bridge, L, 2));
      bridge.pushInteger(L, 1);
      return 1;
    },
    receive(L: number) {
      const ctx = socketContext(rt);
      const s = get(L, 'receive');
      if (!s.sock) return pushFailure(bridge, L, 'closed');
      const size = Math.min(bridge.type(L, 2) === T.NUMBER ? bridge.toInteger(L, 2) ?? MAX_DATAGRAM : MAX_DATAGRAM, MAX_DATAGRAM);
      const take = (L1: number): number => {
        const m = s.queue.shift();
        if (!m && s.failed) {
          const text = strerror(s.failed.code);
          s.failed = undefined;
          return pushFailure(bridge, L1, text.charAt(0).toLowerCase() + text.slice(1));
        }
        if (!m) return pushFailure(bridge, L1, s.sock ? 'timeout' : 'closed');
        bridge.pushBytes(L1, m.length > size ? m.subarray(0, size) : m);
        return 1;
      };
      if (s.queue.length || s.failed) return take(L);
      const ms = s.timeout || s.settings.readTimeout;
      const arrived = new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          s.wake = undefined;
          if (s.settings.logErrors) logFor(ctx, LogLevel.error, 'lua udp socket read timed out');
          resolve();
        }, ms);
        s.wake = () => {
          clearTimeout(timer);
          s.wake = undefined;
          resolve();
        };
      });
      return bridge.suspend(arrived, take);
    },
    settimeout(L: number) {
      get(L, 'settimeout').timeout = timeoutArg(bridge, L, 2);
      return 0;
    },
    close(L: number) {
      const s = get(L, 'close');
      if (!s.sock) return pushFailure(bridge, L, 'closed');
      closeSock(s);
      bridge.pushInteger(L, 1);
      return 1;
    },
  };
}
