/**
 * serverless-pre-function and serverless-post-function
 * (apisix/plugins/serverless/init.lua): `functions` are Lua sources, each
 * returning a function that is called with (conf, ctx) in `phase`; one
 * that returns a code (and body) ends the request as core.response.exit
 * does. They run on the worker's Lua VM, the one OpenResty's `*_by_lua`
 * hooks use, with its `ngx` API (`ngx.say`, `ngx.exit`, `ngx.req`,
 * `ngx.header`, `ngx.var`). That VM belongs to the Lua hook module, a
 * layer the gateway does not import: the http gateway module hands it over
 * here (provideLuaFunctions), and the first request that needs it waits
 * while it is made.
 */
import type { BodyChunk, PhaseResult, PluginContext } from './phase-api.ts';
import type { GatewayPlugin } from './registry.ts';

export const SERVERLESS_PHASES = ['rewrite', 'access', 'header_filter', 'body_filter', 'log', 'before_proxy'] as const;
export type ServerlessPhase = (typeof SERVERLESS_PHASES)[number];

export interface ServerlessConf { phase: ServerlessPhase; functions: string[] }

/** The Lua side, as the Lua hook module runs it (src/http/modules/lua/gateway-functions.ts). */
export interface LuaFunctions {
  /** APISIX's check_schema for one source: undefined, or `failed to loadstring: …` / `pcall error: …` / `only accept Lua function, …`. */
  check(source: string): string | undefined;
  /** Calls `conf.functions` for the request; a code (and body) one of them returned, or the engine's end of an `ngx.exit`. */
  run(conf: ServerlessConf, ctx: PluginContext): PhaseResult | Promise<PhaseResult>;
  /** body_filter: the functions see the chunk as `ngx.arg[1]` and the end flag as `ngx.arg[2]`, and may change both. */
  filterBody(conf: ServerlessConf, ctx: PluginContext, chunk: BodyChunk): BodyChunk;
  /** A route's `filter_func` (apisix/admin/routes.lua): undefined, or `failed to load 'filter_func' string: …` / `'filter_func' should be a function`. */
  checkFilter(source: string): string | undefined;
  /** Calls a route's `filter_func` with the request's variables (compiled once per source); an error is false. */
  filter(source: string, read: (name: string) => string | undefined, request?: object): boolean;
}

let make: (() => Promise<LuaFunctions>) | undefined;
let made: LuaFunctions | undefined;
let making: Promise<LuaFunctions> | undefined;

/** The worker's Lua, made on first use by `factory` (set by the http gateway module when the worker starts). */
export function provideLuaFunctions(factory: (() => Promise<LuaFunctions>) | undefined): void {
  make = factory;
  made = undefined;
  making = undefined;
}

/** The Lua side now, or a promise of it while the VM is made (undefined: this process has none). */
function lua(): LuaFunctions | Promise<LuaFunctions> | undefined {
  if (made) return made;
  if (!make) return undefined;
  making ??= make().then((l) => (made = l));
  return making;
}

/** The worker's Lua if it is made (the router's filter_func runs only then), else undefined. */
export function luaNow(): LuaFunctions | undefined {
  return made;
}

/** The worker's Lua, made if need be (undefined: this process has none). */
export async function luaReady(): Promise<LuaFunctions | undefined> {
  return await lua();
}

function runIn(phase: ServerlessPhase, conf: ServerlessConf, ctx: PluginContext): PhaseResult | Promise<PhaseResult> {
  const l = lua();
  if (conf.phase !== phase) {
    // the rewrite of a request with functions for a later phase waits for the VM (the filters cannot)
    return phase === 'rewrite' && l instanceof Promise ? l.then(() => undefined) : undefined;
  }
  if (!l) return { status: 503 };
  return l instanceof Promise ? l.then((x) => x.run(conf, ctx)) : l.run(conf, ctx);
}

/** A serverless plugin with APISIX's name and priority (serverless-pre-function.ts, serverless-post-function.ts). */
export function serverless(name: string, priority: number): GatewayPlugin<ServerlessConf> {
  return {
    name, version: 0.1, priority,
    schema: {
      type: 'object',
      properties: {
        phase: { type: 'string', default: 'access', enum: [...SERVERLESS_PHASES] },
        functions: { type: 'array', items: { type: 'string' }, minItems: 1 },
      },
      required: ['functions'],
    },
    async checkConf(conf) {
      const l = await lua();
      if (!l) return undefined;
      for (const source of conf.functions) {
        const err = l.check(source);
        if (err) return err;
      }
      return undefined;
    },
    rewrite: (conf, ctx) => runIn('rewrite', conf, ctx),
    access: (conf, ctx) => runIn('access', conf, ctx),
    beforeProxy: (conf, ctx) => runIn('before_proxy', conf, ctx),
    headerFilter(conf, ctx) {
      if (conf.phase === 'header_filter' && made) void made.run(conf, ctx);
    },
    bodyFilter(conf, ctx, chunk) {
      return conf.phase === 'body_filter' && made ? made.filterBody(conf, ctx, chunk) : undefined;
    },
    log(conf, ctx) {
      if (conf.phase === 'log' && made) void made.run(conf, ctx);
    },
  };
}
