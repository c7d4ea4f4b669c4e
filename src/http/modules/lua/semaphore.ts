/**
 * The host half of `require "ngx.semaphore"` (semaphore.lua is the Lua
 * half): a worker's semaphores, shared by its requests and timers. A wait
 * takes a resource at once when nobody queues before it; otherwise the
 * coroutine yields until a post hands it one (first come, first woken) or
 * its timeout passes. As OpenResty posts an event from sema:post, waiters
 * wake after the poster's code yields, not inside post; a waiter whose
 * request or thread ends leaves the queue.
 */
import fs from 'node:fs';
import { LuaError } from '../../../lua/bridge.ts';
import { mainErrorLog } from '../../../core/error-log.ts';
import { currentContext, refuseIn } from './runtime.ts';
import type { LuaRuntime } from './runtime.ts';

interface Waiter {
  wake(ok: boolean): void;
}

class Semaphore {
  resources: number;
  readonly waiters: Waiter[] = [];
  /** A wake-up is scheduled (OpenResty's posted sem_event). */
  posted = false;
  constructor(n: number) {
    this.resources = n;
  }

  /** ngx_http_lua_sema_handler: the longest waiters take what was posted. */
  wakeWaiters(): void {
    this.posted = false;
    while (this.waiters.length && this.resources > 0) {
      this.resources--;
      this.waiters.shift()!.wake(true);
    }
  }
}

/** The phases where a thread may wait (OpenResty's yieldable contexts), by what refuseIn refuses. */
const CANNOT_WAIT = ['set', 'log', 'header_filter', 'body_filter', 'init_worker'];

/** C's int conversion, as lua-resty-core passes counts and milliseconds through the FFI. */
const int = (n: number) => Math.trunc(n) | 0;

/** `exiting`: the worker is stopping (then a semaphore collected with waiters is not worth a line). */
export function semaphoreLibrary(rt: LuaRuntime, exiting: () => boolean): Record<string, unknown> {
  const { bridge } = rt.vm;
  const all = new Map<number, Semaphore>();
  let nextId = 1;
  const sema = (L: number): Semaphore => all.get(bridge.toNumber(L, 1) ?? 0)!;

  return {
    /** semaphore.lua's chunk: called with this table, it gives the module. */
    chunk(L: number) {
      bridge.load(L, fs.readFileSync(new URL('semaphore.lua', import.meta.url)), 'ngx/semaphore.lua');
      return 1;
    },
    known: (L: number) => (bridge.pushBoolean(L, all.has(bridge.toNumber(L, 1) ?? 0)), 1),
    new(L: number) {
      const id = nextId++;
      all.set(id, new Semaphore(int(bridge.toNumber(L, 1) ?? 0)));
      bridge.pushInteger(L, id);
      return 1;
    },
    post(L: number) {
      const s = sema(L);
      s.resources += int(bridge.toNumber(L, 2) ?? 1);
      if (s.waiters.length && !s.posted) {
        s.posted = true;
        // after the poster's code yields, as nginx runs posted events after the current handler
        setImmediate(() => s.wakeWaiters());
      }
      return 0;
    },
    count(L: number) {
      const s = sema(L);
      bridge.pushInteger(L, s.resources - s.waiters.length);
      return 1;
    },
    wait(L: number) {
      const s = sema(L);
      const ms = int(bridge.toNumber(L, 2) ?? 0);
      const ctx = currentContext(rt);
      // init_by_lua has no request at all; init_worker_by_lua's fake one is refused below
      if (!ctx) throw new LuaError('no request found');
      try {
        refuseIn(ctx, CANNOT_WAIT);
      } catch (e) {
        bridge.pushNil(L);
        bridge.pushString(L, (e as Error).message);
        return 2;
      }
      if (!s.waiters.length && s.resources > 0) {
        s.resources--;
        bridge.pushBoolean(L, true);
        return 1;
      }
      if (ms === 0) {
        bridge.pushNil(L);
        bridge.pushString(L, 'timeout');
        return 2;
      }
      let waiter!: Waiter;
      let timer: NodeJS.Timeout;
      const woken = new Promise<boolean>((resolve) => {
        waiter = { wake: (ok) => (clearTimeout(timer), resolve(ok)) };
        timer = setTimeout(() => {
          s.waiters.splice(s.waiters.indexOf(waiter), 1);
          resolve(false);
        }, ms);
      });
      s.waiters.push(waiter);
      return bridge.suspend(woken, (L1, ok) => {
        bridge.pushBoolean(L1, ok);
        if (ok) bridge.pushNil(L1);
        else bridge.pushString(L1, 'timeout');
        return 2;
      }, () => {
        // the waiting thread is gone (its request ended, it was killed): it leaves the queue
        clearTimeout(timer);
        const at = s.waiters.indexOf(waiter);
        if (at >= 0) s.waiters.splice(at, 1);
      });
    },
    gc(L: number) {
      const id = bridge.toNumber(L, 1) ?? 0;
      const s = all.get(id);
      if (!s) return 0;
      all.delete(id);
      const log = mainErrorLog();
      log.debug(`in lua gc, semaphore ${id}`);
      if (s.waiters.length && !exiting()) {
        log.error(`in lua semaphore gc wait queue is not empty while the semaphore ${id} is being destroyed`);
      }
      return 0;
    },
  };
}
