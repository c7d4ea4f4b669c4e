/**
 * Hooks run in their own coroutine (OpenResty's "entry thread"): lua_newthread + lua_resume.
 * When Lua never waits, `run` returns its outcome synchronously (no promise, no microtask): the fast
 * path for the common hook. When a host function suspends (bridge.suspend), `run` returns a promise;
 * the runner awaits the host's promise and resumes the coroutine until it finishes.
 *
 * Threads are reused: one that finished (or failed and was reset) goes back to a small pool, so a
 * request costs no lua_newthread. A failure comes back as OpenResty reports it: the message, and
 * a traceback taken from the dead coroutine's stack before it is reset, both in LuaJIT's words.
 */
import { type LuaBridge, STATUS, T } from './bridge.ts';
import { luajitMessage, luajitTraceback } from './luajit-messages.ts';

export type LuaOutcome<R> =
  | { readonly ok: true; readonly value: R }
  | { readonly ok: false; readonly error: string; readonly traceback: string; readonly killed?: true; readonly notString?: true };

export interface RunOptions<R> {
  /** Pushes the arguments onto the coroutine (after the function); returns how many. */
  readonly args?: (L: number) => number;
  /** Reads the `n` results (at the top of `L`) before the thread is reused. */
  readonly results?: (L: number, n: number) => R;
  /** Kills the coroutine when it is waiting (OpenResty finalizing a request's threads). */
  readonly signal?: KillSignal;
}

const KILLED = Symbol('killed');

/**
 * What ends coroutines that wait for the host without resuming them (ngx.exit in one light thread
 * ends the request's others): each waiting coroutine run with this signal is reset at once when it
 * is killed, its wait let go (`Suspension.cancel`), and its outcome is `{ ok: false, killed: true }`.
 */
export class KillSignal {
  killed = false;
  private wake: (() => void) | undefined;
  private promise: Promise<typeof KILLED> | undefined;

  private children: KillSignal[] | undefined;
  /** What lets go of the wait in progress (Suspension.cancel), run at once when killed. */
  letGo: (() => void) | undefined;

  kill(): void {
    if (this.killed) return;
    this.killed = true;
    // at once, as OpenResty's cleanup runs inside ngx.thread.kill (a semaphore's count shows it)
    const letGo = this.letGo;
    this.letGo = undefined;
    letGo?.();
    this.wake?.();
    this.children?.forEach((c) => c.kill());
  }

  /** A signal killed with this one, or alone (a light thread that ngx.thread.kill ends). */
  child(): KillSignal {
    const c = new KillSignal();
    if (this.killed) c.kill();
    else (this.children ??= []).push(c);
    return c;
  }

  /** Settles when killed (made on first use: a hook that never waits costs no promise). */
  get settled(): Promise<typeof KILLED> {
    return (this.promise ??= new Promise((resolve) => {
      this.wake = () => resolve(KILLED);
      if (this.killed) resolve(KILLED);
    }));
  }
}

/** The hook being run: what host functions ask for their request. */
export interface RunningCoroutine {
  /** The coroutine's lua_State pointer. */
  readonly thread: number;
  /** What the caller of `run` attached (the request). */
  readonly context: unknown;
}

interface Entry extends RunningCoroutine {
  readonly ref: number;
  context: unknown;
}

const POOL_SIZE = 64;

export class CoroutineRunner {
  private readonly bridge: LuaBridge;
  private readonly pool: Entry[] = [];
  private readonly nresultsPtr: number;
  /** The coroutine resumed right now (null between resumes). */
  running: RunningCoroutine | null = null;

  constructor(bridge: LuaBridge) {
    this.bridge = bridge;
    this.nresultsPtr = bridge.outPtr + 8;
  }

  /**
   * Runs the function at registry reference `fn` in a coroutine with `context` attached.
   * Returns the outcome, or a promise of it when the coroutine waited for the host.
   */
  run<R = undefined>(fn: number, context: unknown, options: RunOptions<R> = {}): LuaOutcome<R> | Promise<LuaOutcome<R>> {
    const entry = this.take(context);
    const L = entry.thread;
    this.bridge.pushRef(L, fn);
    let nargs = 0;
    try {
      if (options.args) nargs = options.args(L);
    } catch (e) {
      this.bridge.api.lua_settop(L, 0);
      this.release(entry);
      throw e;
    }
    const status = this.resume(entry, nargs);
    if (status === STATUS.YIELD) return this.wait(entry, options);
    return this.finish(entry, status, options);
  }

  private take(context: unknown): Entry {
    const entry = this.pool.pop();
    if (entry) {
      entry.context = context;
      return entry;
    }
    const { api, L } = this.bridge;
    const thread = api.lua_newthread(L);
    return { thread, ref: this.bridge.ref(L), context };
  }

  private resume(entry: Entry, nargs: number): number {
    const previous = this.running;
    this.running = entry;
    try {
      return this.bridge.api.lua_resume(entry.thread, this.bridge.L, nargs, this.nresultsPtr);
    } finally {
      this.running = previous;
    }
  }

  private async wait<R>(entry: Entry, options: RunOptions<R>): Promise<LuaOutcome<R>> {
    const bridge = this.bridge;
    const signal = options.signal;
    for (;;) {
      const suspended = bridge.suspended;
      bridge.suspended = undefined;
      if (!suspended) {
        // coroutine.yield() straight from the hook: OpenResty resumes it at once (ngx.sleep(0)-like).
        bridge.api.lua_settop(entry.thread, 0);
        await Promise.resolve();
        if (signal?.killed) return this.kill(entry);
        const status = this.resume(entry, 0);
        if (status !== STATUS.YIELD) return this.finish(entry, status, options);
        continue;
      }
      if (signal) signal.letGo = suspended.cancel;
      try {
        const value = await (signal ? Promise.race([suspended.promise, signal.settled]) : suspended.promise);
        bridge.resumption = { ok: true, value, suspension: suspended };
      } catch (error) {
        bridge.resumption = { ok: false, error, suspension: suspended };
      }
      if (signal) signal.letGo = undefined;
      if (signal?.killed) {
        // kill() let go of the wait already
        bridge.resumption = undefined;
        return this.kill(entry);
      }
      const status = this.resume(entry, 0);
      if (status !== STATUS.YIELD) return this.finish(entry, status, options);
    }
  }

  /**
   * A waiting coroutine ends without resuming: its stack is reset (to-be-closed variables closed)
   * and the thread let go, not pooled: a coroutine reset while it waited inside a pcall keeps that
   * pcall's message handler as its error function, and a later error there would call a stale slot
   * (`error in error handling`).
   */
  private kill(entry: Entry): LuaOutcome<never> {
    const { api } = this.bridge;
    api.lua_resetthread(entry.thread);
    api.lua_settop(entry.thread, 0);
    entry.context = undefined;
    this.bridge.unref(entry.ref);
    return { ok: false, error: 'killed', traceback: '', killed: true };
  }

  private finish<R>(entry: Entry, status: number, options: RunOptions<R>): LuaOutcome<R> {
    const { api } = this.bridge;
    const L = entry.thread;
    let outcome: LuaOutcome<R>;
    if (status === STATUS.OK) {
      const n = this.bridge.u32()[this.nresultsPtr >> 2]!;
      let value = undefined as R;
      if (options.results) {
        try {
          value = options.results(L, n);
        } catch (e) {
          api.lua_settop(L, 0);
          this.release(entry);
          throw e;
        }
      }
      outcome = { ok: true, value };
      api.lua_settop(L, 0);
    } else {
      const error = this.errorMessage(L);
      const type = this.bridge.type(L, -1);
      outcome = type === T.STRING || type === T.NUMBER
        ? { ok: false, error, traceback: this.traceback(L) }
        : { ok: false, error, traceback: this.traceback(L), notString: true };
      api.lua_resetthread(L); // leaves the error object on the stack
      api.lua_settop(L, 0);
    }
    this.release(entry);
    return outcome;
  }

  private release(entry: Entry): void {
    entry.context = undefined;
    if (this.pool.length < POOL_SIZE) this.pool.push(entry);
    else this.bridge.unref(entry.ref);
  }

  private errorMessage(L: number): string {
    const type = this.bridge.type(L, -1);
    if (type === T.STRING || type === T.NUMBER) return luajitMessage(this.bridge.toString(L, -1)!);
    // OpenResty takes the error as a string or says it does not know (error(nil), a table)
    return 'unknown reason';
  }

  /** OpenResty's shape: "stack traceback:\ncoroutine 0:\n\t..." from the failed coroutine's frames. */
  private traceback(co: number): string {
    const { api, L } = this.bridge;
    // OpenResty shows the first 22 levels and then `...`; Lua 5.4's luaL_traceback shows the
    // first 10 and the last 11 of a deeper stack, so the levels are gathered 10 at a time
    const frames: string[] = [];
    for (let level = 0; frames.length <= TRACEBACK_DEPTH; level += 10) {
      api.luaL_traceback(L, co, 0, level);
      const lines = (this.bridge.toString(L, -1) ?? '').split('\n').slice(1);
      api.lua_settop(L, -2);
      const skipped = lines.findIndex((l) => l.startsWith('\t...'));
      if (skipped < 0) {
        frames.push(...lines);
        break;
      }
      frames.push(...lines.slice(0, skipped));
    }
    if (frames.length > TRACEBACK_DEPTH) frames.splice(TRACEBACK_DEPTH, Infinity, '\t...');
    return luajitTraceback(`stack traceback:\ncoroutine 0:\n${frames.join('\n')}`);
  }
}

/** How many levels OpenResty's traceback shows (NGX_HTTP_LUA_BT_DEPTH). */
const TRACEBACK_DEPTH = 22;

/** OpenResty's error.log text for a hook that failed: `lua entry thread aborted: runtime error: …`. */
export function abortedMessage(outcome: { error: string; traceback: string }): string {
  return `lua entry thread aborted: runtime error: ${outcome.error}\n${outcome.traceback}`;
}
