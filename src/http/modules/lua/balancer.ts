/**
 * balancer_by_lua* and the `ngx.balancer` module: an `upstream {}` block's
 * peer chooser that runs the hook once per try (the upstream engine's
 * per-try seam, src/http/upstream/peer-choice.ts). The hook picks the peer
 * with set_current_peer; without one the group's own servers are used, as
 * OpenResty falls back to round robin over them. The hook cannot wait: the
 * APIs that would are refused as in OpenResty (`API disabled in the context
 * of balancer_by_lua*`), and a failed hook ends the request with 500.
 */
import net from 'node:net';
import type { HostFunction } from '../../../lua/bridge.ts';
import { LuaError, T } from '../../../lua/bridge.ts';
import type { UpstreamGroup } from '../../../upstream/group.ts';
import { addressName } from '../../../upstream/address.ts';
import { peerAt } from '../../../upstream/peer-chooser.ts';
import type { ChosenPeer, PeerChooser } from '../../../upstream/peer-chooser.ts';
import { PEER_FAILED, PEER_NEXT } from '../../../upstream/round-robin.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import { defaultPeerChooser, setGroupPeerChooser, useUpstreamTimeouts } from '../../upstream/peer-choice.ts';
import type { UpstreamTimeouts } from '../../upstream/peer-choice.ts';
import type { LuaHook } from './conf.ts';
import { runtimeOf } from './hooks.ts';
import { currentContext } from './runtime.ts';
import type { HookContext, LuaRuntime } from './runtime.ts';

/** One request's balancer (OpenResty's ngx_http_lua_balancer_peer_data_t). */
class LuaBalancer implements PeerChooser {
  tries: number;
  triesLimit?: number;
  /** The peer set_current_peer gave (kept for later tries that set none). */
  peer: ChosenPeer | undefined;
  moreTries = 0;
  /** Set by the engine (PeerChooser.recreateRequest). */
  recreateRequest?: () => void;
  /** Tries started so far (set_more_tries counts them against proxy_next_upstream_tries). */
  totalTries = 0;
  /** How the last try on a Lua-set peer ended: PEER_FAILED / PEER_NEXT, or undefined before any. */
  lastState: number | undefined;
  lastStatus = 0;
  private usedFallback = false;
  readonly r: HttpRequest;
  private readonly hook: LuaHook;
  private readonly fallback: PeerChooser;

  constructor(r: HttpRequest, hook: LuaHook, fallback: PeerChooser) {
    this.r = r;
    this.hook = hook;
    this.fallback = fallback;
    this.tries = fallback.tries;
  }

  get(_lastFailure: number, lastStatus: number): ChosenPeer | undefined | number {
    this.lastStatus = lastStatus;
    const runtime = runtimeOf(this.r);
    const ctx: HookContext = { runtime, r: this.r, phase: 'balancer' };
    running.set(ctx, this);
    const outcome = runtime.run(this.hook, ctx);
    running.delete(ctx);
    // counted after the hook, as OpenResty counts (set_more_tries on the first try sees none)
    this.totalTries++;
    if (outcome instanceof Promise) {
      requestLog(this.r, 'connecting to upstream').error('failed to run balancer_by_lua*: attempt to yield across C-call boundary');
      return 500;
    }
    if (!outcome.ok && ctx.exit === undefined) {
      // OpenResty runs the hook with lua_pcall, not in a coroutine: its traceback has no coroutine line
      const tb = outcome.traceback.replace(/^stack traceback:\ncoroutine 0:\n/, 'stack traceback:\n');
      requestLog(this.r, 'connecting to upstream').error(`failed to run balancer_by_lua*: ${outcome.error}${tb ? '\n' + tb : ''}`);
      return 500;
    }
    // ngx.exit(ngx.OK) goes on; any other status is a 500 with OpenResty 0.10.23 on nginx 1.22
    if (ctx.exit !== undefined && ctx.exit !== 0) return 500;
    this.usedFallback = !this.peer;
    if (this.usedFallback) return this.fallback.get(_lastFailure, lastStatus);
    this.tries += this.moreTries;
    this.moreTries = 0;
    return this.peer;
  }

  free(state: number): boolean {
    if (this.usedFallback) {
      // one count of tries, as OpenResty's pc->tries is both its own and round robin's
      this.fallback.tries = this.tries;
      const disabled = this.fallback.free(state);
      this.tries = this.fallback.tries;
      return disabled;
    }
    this.lastState = state;
    if (this.tries) this.tries--;
    return false;
  }

  /** set_more_tries: OpenResty's cap by proxy_next_upstream_tries, with its warning. */
  addTries(count: number): string | undefined {
    const max = this.triesLimit ?? 0;
    const total = this.totalTries + this.tries;
    let warning: string | undefined;
    if (max && total + count > max) {
      count = max - total;
      warning = 'reduced tries due to limit';
    }
    this.moreTries = count;
    return warning;
  }
}

/** The balancer of the hook running now, by its context. */
const running = new WeakMap<HookContext, LuaBalancer>();

/** `balancer_by_lua*` in `upstream {}`: every request to the group asks the hook once per try. */
export function useLuaBalancer(group: UpstreamGroup, hook: LuaHook): void {
  setGroupPeerChooser(group, (r, place) => new LuaBalancer(r, hook, defaultPeerChooser(r, place)));
}

/**
 * What set_current_peer was given as a peer: an IP address (with the port
 * argument, or its own `:port`), `[v6]:port`, or `unix:/path`; a host name
 * is refused as OpenResty refuses it (no resolving here).
 */
function peerFrom(addr: string, port: number): ChosenPeer | string {
  if (addr.slice(0, 5).toLowerCase() === 'unix:') {
    const path = addr.slice(5);
    if (!path) return 'no path in the unix domain socket';
    return { name: addr, addr: { name: addr, path } };
  }
  let host = addr;
  const m = /^\[([^\]]*)\](?::(\d+))?$/.exec(addr) ?? /^([^:]*):(\d+)$/.exec(addr);
  if (m) {
    host = m[1];
    if (m[2] !== undefined) port = Number(m[2]);
  }
  if (!net.isIP(host)) return 'no host allowed';
  if (port < 0 || port > 65535) return 'invalid port';
  const peer = peerAt(host, port);
  return net.isIPv6(host) ? { name: addressName(host, port), addr: peer.addr } : peer;
}

/** The host half of `require "ngx.balancer"`. */
export function balancerLibrary(rt: LuaRuntime): Record<string, HostFunction> {
  const { bridge } = rt.vm;

  /** The balancer of the running hook; outside any request, lua-resty-core's `no request found`. */
  const current = (): LuaBalancer | undefined => {
    const ctx = currentContext(rt);
    if (!ctx?.r) throw new LuaError('no request found', 1);
    return running.get(ctx);
  };
  const refused = (L: number, n = 2): number => {
    bridge.pushNil(L);
    if (n === 3) bridge.pushNil(L);
    bridge.pushString(L, 'no upstream found');
    return n;
  };
  const timeout = (L: number, idx: number, what: string): number | undefined => {
    if (bridge.type(L, idx) === T.NIL || (bridge.type(L, idx) === T.BOOLEAN && !bridge.toBoolean(L, idx))) return undefined;
    const v = bridge.type(L, idx) === T.NUMBER ? bridge.toNumber(L, idx)! : NaN;
    if (!(v > 0)) throw new LuaError(`bad ${what} timeout`, 1);
    return Math.round(v * 1000);
  };

  return {
    set_current_peer(L) {
      const b = current();
      if (!b) return refused(L);
      const addr = bridge.toString(L, 1);
      if (addr === undefined) throw new LuaError("bad argument #1 to 'set_current_peer' (string expected)", 1);
      const port = bridge.type(L, 2) === T.NIL ? 0 : bridge.toNumber(L, 2) ?? 0;
      const peer = peerFrom(addr, Math.trunc(port));
      if (typeof peer === 'string') {
        bridge.pushNil(L);
        bridge.pushString(L, peer);
        return 2;
      }
      b.peer = peer;
      bridge.pushBoolean(L, true);
      return 1;
    },
    set_more_tries(L) {
      const b = current();
      if (!b) return refused(L);
      const warning = b.addTries(Math.trunc(bridge.toNumber(L, 1) ?? 0));
      bridge.pushBoolean(L, true);
      if (warning === undefined) return 1;
      bridge.pushString(L, warning);
      return 2;
    },
    get_last_failure(L) {
      const b = current();
      if (!b) return refused(L, 3);
      if (b.lastState === undefined) {
        bridge.pushNil(L);
        return 1;
      }
      bridge.pushString(L, b.lastState === PEER_NEXT ? 'next' : b.lastState === PEER_FAILED ? 'failed' : 'unknown');
      bridge.pushInteger(L, b.lastStatus);
      return 2;
    },
    set_timeouts(L) {
      const b = current();
      const t: UpstreamTimeouts = {};
      const connect = timeout(L, 1, 'connect');
      const send = timeout(L, 2, 'send');
      const read = timeout(L, 3, 'read');
      if (!b) {
        bridge.pushBoolean(L, false);
        bridge.pushString(L, 'no upstream found');
        return 2;
      }
      if (connect !== undefined) t.connectTimeout = connect;
      if (send !== undefined) t.sendTimeout = send;
      if (read !== undefined) t.readTimeout = read;
      useUpstreamTimeouts(b.r, t);
      bridge.pushBoolean(L, true);
      return 1;
    },
    recreate_request(L) {
      // the head and body again from the request as it is now (its body set in this hook)
      const b = current();
      if (!b) return refused(L);
      b.recreateRequest?.();
      bridge.pushBoolean(L, true);
      return 1;
    },
  };
}
