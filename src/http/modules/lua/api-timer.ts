/**
 * ngx.timer.at/every/running_count/pending_count. ngx.lua keeps each
 * timer's function and arguments; the host schedules it and, when it is
 * due, runs ngx.lua's timer runner in a coroutine of its own (no request:
 * output and ngx.req refuse, ngx.sleep and ngx.shared work). When the
 * worker stops serving this configuration, timers still pending run at
 * once with `premature` true, as OpenResty runs them on worker exit, and a
 * graceful stop waits for the running ones to end (nginx keeps a worker
 * while its timers' fake connections are open, up to worker_shutdown_timeout).
 */
import { LuaError } from '../../../lua/bridge.ts';
import { KillSignal } from '../../../lua/coroutine.ts';
import type { LuaOutcome } from '../../../lua/coroutine.ts';
import { currentContext } from './runtime.ts';
import type { HookContext, LuaRuntime } from './runtime.ts';
import { closeSocketsOf } from './socket-lifetime.ts';
import { mainErrorLog } from '../../../core/error-log.ts';

/** OpenResty's defaults for lua_max_pending_timers and lua_max_running_timers. */
const MAX_PENDING = 1024;
const MAX_RUNNING = 256;

interface Timer {
  handle: NodeJS.Timeout;
  every: number;
  /** `, client: …, server: …` of the request that made it (OpenResty's fake connection copies them). */
  origin: string;
}

export class LuaTimers {
  private readonly rt: LuaRuntime;
  private readonly pending = new Map<number, Timer>();
  private running = 0;
  /** Told when no timer runs or waits any more (expire()'s wait). */
  private idle: (() => void) | undefined;
  private nextId = 1;
  exiting = false;

  constructor(rt: LuaRuntime) {
    this.rt = rt;
  }

  library(): Record<string, unknown> {
    const { bridge } = this.rt.vm;
    const add = (every: boolean) => (L: number): number => {
      const given = bridge.toNumber(L, 1);
      if (given === undefined) throw new LuaError(`bad argument #1 to '${every ? 'every' : 'at'}' (number expected, got ${bridge.typeName(L, 1)})`, 2);
      // OpenResty takes a negative delay as none
      const delay = Math.max(0, given);
      if (every && delay === 0) throw new LuaError("bad argument #1 to 'every' (delay cannot be zero)", 2);
      // at exit a timer for now still runs (APISIX's loggers flush so), a later one is refused
      if (this.exiting && delay > 0) return (bridge.pushNil(L), bridge.pushString(L, 'process exiting'), 2);
      if (this.pending.size >= (this.rt.conf.maxPendingTimers ?? MAX_PENDING)) return (bridge.pushNil(L), bridge.pushString(L, 'too many pending timers'), 2);
      const id = this.nextId++;
      const ctx = currentContext(this.rt);
      const r = ctx?.r;
      // the listening address as the listen directive gave it (nginx's listening->addr_text: 0.0.0.0:80);
      // a timer made in a timer copies its fake connection's
      const origin = r ? `, client: ${r.remoteAddress}, server: ${r.conn.addr.spec.key}` : ctx?.origin ?? '';
      // OpenResty makes the timer's coroutine now, from its thread cache
      this.rt.newThread(ctx);
      this.schedule(id, delay * 1000, every ? delay * 1000 : 0, origin);
      bridge.pushInteger(L, id);
      return 1;
    };
    return {
      at: add(false),
      every: add(true),
      /** ngx.lua's word that a timer could not run (`lua failed to run timer with function defined at …`). */
      refused: (L: number) => (mainErrorLog().alert(bridge.toString(L, 1) ?? ''), 0),
      running_count: (L: number) => (bridge.pushInteger(L, this.running), 1),
      pending_count: (L: number) => (bridge.pushInteger(L, this.pending.size), 1),
    };
  }

  private schedule(id: number, ms: number, every: number, origin: string): void {
    const handle = setTimeout(() => this.fire(id, false), ms);
    this.pending.set(id, { handle, every, origin });
  }

  private fire(id: number, premature: boolean): void {
    const t = this.pending.get(id);
    if (!t) return;
    this.pending.delete(id);
    mainErrorLog().debug('lua ngx.timer expired');
    // a repeating timer is scheduled again before its run (even one refused below), as OpenResty does
    const again = t.every > 0 && !premature;
    if (again) {
      this.rt.newThread(undefined);
      this.schedule(id, t.every, t.every, t.origin);
    }
    // its own signal: ngx.exit in one of its light threads ends the others, as in a request
    const ctx: HookContext = { runtime: this.rt, r: undefined, phase: 'timer', origin: t.origin, signal: new KillSignal() };
    const maxRunning = this.rt.conf.maxRunningTimers ?? MAX_RUNNING;
    if (this.running >= maxRunning) {
      // ngx.lua logs it at alert with where the function was defined
      void this.rt.runTimer(id, premature, !again, ctx, `${maxRunning} lua_max_running_timers are not enough`);
      return;
    }
    this.running++;
    const outcome = this.rt.runTimer(id, premature, !again, ctx);
    const done = (o: LuaOutcome<undefined>) => {
      this.running--;
      if (this.running === 0 && this.pending.size === 0) this.idle?.();
      if (!o.ok && ctx.exit === undefined) this.rt.logFailure(ctx, o);
      this.rt.delThread(ctx);
      this.rt.forgetThreads(ctx);
      this.rt.releaseOwnCtx(ctx);
      mainErrorLog().debug('http lua close fake http connection');
      closeSocketsOf(ctx);
    };
    if (outcome instanceof Promise || ctx.threads?.size) void afterThreads(ctx, outcome).then(done);
    else done(outcome);
  }

  /** The worker stops serving: pending timers run now with premature true; resolves when no timer runs any more. */
  expire(): Promise<void> {
    this.exiting = true;
    for (const [id, t] of [...this.pending]) {
      clearTimeout(t.handle);
      this.fire(id, true);
    }
    if (this.running === 0 && this.pending.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.idle = () => {
        this.idle = undefined;
        resolve();
      };
    });
  }
}

/** The timer's function ended: as a request's entry thread, it waits for its light threads, unless it failed or ended them (ngx.exit). */
async function afterThreads(ctx: HookContext, outcome: LuaOutcome<undefined> | Promise<LuaOutcome<undefined>>): Promise<LuaOutcome<undefined>> {
  const o = await outcome;
  if (!o.ok && ctx.exit === undefined) ctx.signal?.kill();
  while (ctx.threads?.size && o.ok && ctx.exit === undefined) await Promise.all(ctx.threads.values());
  return o;
}
