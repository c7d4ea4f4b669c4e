/**
 * ngx.socket: the host halves of the TCP and UDP cosockets, and the Lua
 * half (socket.lua) that ngx.lua runs over them to build the table.
 */
import fs from 'node:fs';
import type { LuaRuntime } from './runtime.ts';
import { tcpLibrary } from './api-socket-tcp.ts';
import { udpLibrary } from './api-socket-udp.ts';

export function socketLibrary(rt: LuaRuntime): Record<string, unknown> {
  const { bridge } = rt.vm;
  return {
    tcp: tcpLibrary(rt),
    udp: udpLibrary(rt),
    /** socket.lua's chunk: called with this table, it gives ngx.socket. */
    chunk(L: number) {
      bridge.load(L, fs.readFileSync(new URL('socket.lua', import.meta.url)), 'socket.lua');
      return 1;
    },
  };
}
