/**
 * ngx.thread.spawn/wait/kill: a light thread is ngx.lua's thread runner in
 * a coroutine of its own on the same request, started at once (it runs
 * until it waits or ends, then the spawning code goes on). `wait` makes the
 * caller wait for the first of the given threads to end; the hook's end
 * waits for all its threads, as OpenResty's entry thread does. ngx.exit,
 * ngx.exec, ngx.redirect in any of them end the request's Lua: the others
 * are killed where they wait (runtime.ts's endRequestLua).
 */
import { LuaError } from '../../../lua/bridge.ts';
import { KillSignal } from '../../../lua/coroutine.ts';
import { LogLevel } from '../../../core/error-log.ts';
import { luajitMessage, luajitTraceback } from '../../../lua/luajit-messages.ts';
import { currentContext, logFor, refuseIn, requestContext } from './runtime.ts';
import type { LuaRuntime } from './runtime.ts';

export function threadLibrary(rt: LuaRuntime): Record<string, unknown> {
  const { bridge } = rt.vm;
  const { api } = bridge;
  let nextId = 1;
  // a timer's function may run light threads too (OpenResty allows ngx.thread in ngx.timer)
  const threadContext = () => {
    const ctx = currentContext(rt);
    return ctx?.phase === 'timer' ? ctx : requestContext(rt, 2);
  };
  /** Each running light thread's own kill signal, by id. */
  const kills = new Map<number, KillSignal>();

  return {
    reserve(L: number) {
      const ctx = threadContext();
      refuseIn(ctx, ['set', 'log', 'header_filter', 'body_filter'], 2);
      bridge.pushInteger(L, nextId++);
      return 1;
    },
    /** Runs thread `id` until it waits or ends; true when it ended the request's Lua (ngx.exit …): the spawner unwinds then. */
    start(L: number) {
      // the thread shares the hook's context: ngx.exit in it is the request's, as in OpenResty
      const ctx = threadContext();
      const id = bridge.toInteger(L, 1)!;
      // its own signal, so ngx.thread.kill ends it where it waits (its sleep, its semaphore wait go with it)
      const own = ctx.signal ? ctx.signal.child() : new KillSignal();
      kills.set(id, own);
      const outcome = rt.runThread(id, ctx, own);
      const end = outcome instanceof Promise ? outcome.then(() => id) : Promise.resolve(id);
      (ctx.threadEnds ??= new Map()).set(id, end);
      (ctx.threadIds ??= []).push(id);
      (ctx.threads ??= new Map()).set(id, end);
      void end.then(() => (ctx.threads?.delete(id), kills.delete(id)));
      bridge.pushBoolean(L, ctx.signal?.killed ?? false);
      return 1;
    },
    wait(L: number) {
      const ends = threadContext().threadEnds ?? new Map<number, Promise<number>>();
      const n = api.lua_gettop(L);
      const waiting: Array<Promise<number>> = [];
      for (let i = 1; i <= n; i++) {
        const end = ends.get(bridge.toInteger(L, i) ?? 0);
        if (!end) throw new LuaError('bad thread', 2);
        waiting.push(end);
      }
      return bridge.suspend(Promise.race(waiting), (L1, id) => {
        ends.delete(id);
        bridge.pushInteger(L1, id);
        return 1;
      });
    },
    /** A thread failed: OpenResty's `lua user thread aborted` line (without the traceback). */
    aborted(L: number) {
      // in LuaJIT's words, as the entry coroutine's failures are logged
      const text = luajitTraceback(luajitMessage(bridge.toString(L, 1) ?? ''));
      logFor(currentContext(rt), LogLevel.error, `lua user thread aborted: runtime error: ${text}`);
      return 0;
    },
    kill(L: number) {
      const id = bridge.toInteger(L, 1) ?? 0;
      currentContext(rt)?.threadEnds?.delete(id);
      kills.get(id)?.kill();
      return 0;
    },
  };
}
