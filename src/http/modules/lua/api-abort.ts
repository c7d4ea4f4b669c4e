/**
 * ngx.on_abort (needs `lua_check_client_abort on`): a function that runs as
 * a light thread of the request when the client closes its connection (or
 * half-closes it) while a rewrite, access or content hook is still going.
 * It is ngx.lua's thread runner started by the client's 'end'/'close'
 * rather than by ngx.thread.spawn.
 */
import { luaLoc } from './conf.ts';
import { refuseIn, requestContext } from './runtime.ts';
import type { HookContext, LuaRuntime } from './runtime.ts';

/** Hooks that already have an on_abort function. */
const registered = new WeakSet<HookContext>();

export function abortLibrary(rt: LuaRuntime): Record<string, unknown> {
  const { bridge } = rt.vm;
  // negative: apart from ngx.thread.spawn's ids in ngx.lua's table of threads
  let nextId = -1;
  return {
    /** Registers an abort thread for the running hook: its id (ngx.lua keeps the function), or nil and OpenResty's error. */
    on_abort(L: number) {
      const ctx = requestContext(rt, 2);
      refuseIn(ctx, ['set', 'log', 'header_filter', 'body_filter'], 2);
      const r = ctx.r;
      const fail = (err: string) => (bridge.pushNil(L), bridge.pushString(L, err), 2);
      if (!r.level.get(luaLoc).checkClientAbort) return fail('lua_check_client_abort is off');
      if (registered.has(ctx)) return fail('duplicate call');
      registered.add(ctx);
      const id = nextId--;
      const client = r.sink.client;
      if (client) {
        const fire = () => {
          client.off('end', fire);
          client.off('close', fire);
          if (ctx.eof || r.finished) return;
          // the hook's own context: ngx.exit there ends the request, as it does in OpenResty
          const outcome = rt.runThread(id, ctx);
          const end = outcome instanceof Promise ? outcome.then(() => id) : Promise.resolve(id);
          (ctx.threads ??= new Map()).set(id, end);
          void end.then(() => ctx.threads?.delete(id));
        };
        client.on('end', fire);
        client.on('close', fire);
      }
      bridge.pushInteger(L, id);
      return 1;
    },
  };
}
