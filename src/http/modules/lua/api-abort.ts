/**
 * `lua_check_client_abort on`: a client that closes its connection (or
 * half-closes it) while a rewrite, access or content hook runs is noticed.
 * With an `ngx.on_abort` function, that function runs as a light thread of
 * the request (ngx.lua's thread runner, started by the client's 'end' or
 * 'close' rather than by ngx.thread.spawn); without one the request ends at
 * once with 499 and no response, as OpenResty ends it.
 */
import { terminate } from '../../request-body.ts';
import { requestLog } from '../../request-log.ts';
import { luaLoc } from './conf.ts';
import { C_REFUSED, requestContext } from './runtime.ts';
import type { HookContext, LuaRuntime } from './runtime.ts';

/** The thread id of each hook's on_abort function. */
const handlers = new WeakMap<HookContext, number>();

/**
 * From the start of a hook: watches the client when the location checks for aborts. Returns
 * what to call when the hook ends.
 */
export function watchClientAbort(ctx: HookContext & { r: NonNullable<HookContext['r']> }): (() => void) | undefined {
  const r = ctx.r;
  const client = r.sink.client;
  if (!client || !r.level.get(luaLoc).checkClientAbort) return undefined;
  const stop = () => {
    client.off('end', fire);
    client.off('close', fire);
  };
  function fire(): void {
    stop();
    if (r.finished) return;
    // logged before any ngx.on_abort function runs, as nginx's broken-connection check does
    requestLog(r).info('client prematurely closed connection');
    const id = handlers.get(ctx);
    if (id === undefined) {
      // the hook's end then only lets the connection go
      ctx.exit = -1;
      // the hook and its light threads end where they wait, as OpenResty finalizes them
      ctx.signal?.kill();
      terminate(r, 499);
      return;
    }
    // the hook's own context: ngx.exit there ends the request, as it does in OpenResty
    const outcome = ctx.runtime.runThread(id, ctx);
    const end = outcome instanceof Promise ? outcome.then(() => id) : Promise.resolve(id);
    (ctx.threads ??= new Map()).set(id, end);
    void end.then(() => ctx.threads?.delete(id));
  }
  client.on('end', fire);
  client.on('close', fire);
  return stop;
}

export function abortLibrary(rt: LuaRuntime): Record<string, unknown> {
  const { bridge } = rt.vm;
  // negative: apart from ngx.thread.spawn's ids in ngx.lua's table of threads
  let nextId = -1;
  return {
    /** Registers an abort thread for the running hook: its id (ngx.lua keeps the function), or nil and OpenResty's error. */
    on_abort(L: number) {
      const ctx = requestContext(rt, 2, C_REFUSED);
      const fail = (err: string) => (bridge.pushNil(L), bridge.pushString(L, err), 2);
      if (!ctx.r.level.get(luaLoc).checkClientAbort) return fail('lua_check_client_abort is off');
      if (handlers.has(ctx)) return fail('duplicate call');
      const id = nextId--;
      handlers.set(ctx, id);
      (ctx.threadIds ??= []).push(id);
      bridge.pushInteger(L, id);
      return 1;
    },
  };
}
