/**
 * The cosockets' directives (lua_socket_*, lua_ssl_*): per location, with
 * OpenResty's defaults. A timer has no location: it uses the http block's.
 */
import fs from 'node:fs';
import { defineSlot, inheritUnset } from '../../../conf/context.ts';
import { Ctx } from '../../../conf/directive.ts';
import type { Directive } from '../../../conf/directive.ts';
import { countArg, flagArg, msecArg, sizeArg } from '../../../conf/values.ts';
import type { ConfContext } from '../../../conf/context.ts';

export interface LuaSocketConf {
  connectTimeout?: number;
  sendTimeout?: number;
  readTimeout?: number;
  bufferSize?: number;
  poolSize?: number;
  keepaliveTimeout?: number;
  logErrors?: boolean;
  /** lua_ssl_trusted_certificate's PEM text. */
  trusted?: string;
  verifyDepth?: number;
}

export const SOCKET_DEFAULTS = {
  connectTimeout: 60_000, sendTimeout: 60_000, readTimeout: 60_000, bufferSize: 4096,
  poolSize: 30, keepaliveTimeout: 60_000, logErrors: true, verifyDepth: 1,
};

export type SocketSettings = typeof SOCKET_DEFAULTS & { trusted?: string };

export const luaSocketLoc = defineSlot<LuaSocketConf>('lua_socket', () => ({}), inheritUnset);

/** A location's settings (merged with the defaults), or the defaults alone. */
export function socketSettings(conf: LuaSocketConf | undefined): SocketSettings {
  if (!conf) return SOCKET_DEFAULTS;
  const out: Record<string, unknown> = { ...SOCKET_DEFAULTS };
  for (const [k, v] of Object.entries(conf)) if (v !== undefined) out[k] = v;
  return out as SocketSettings;
}

const IN_LOCATION = Ctx.HTTP | Ctx.SERVER | Ctx.LOCATION | Ctx.LIF;

function setting<K extends keyof LuaSocketConf>(name: string, field: K,
  parse: (cf: ConfContext, v: string) => LuaSocketConf[K], args: Directive['args'] = 1): Directive {
  return {
    name, contexts: IN_LOCATION, args,
    handler(cf, node) {
      const conf = cf.get(luaSocketLoc);
      if (conf[field] !== undefined) return 'is duplicate';
      conf[field] = parse(cf, node.args[0]);
    },
  };
}

/** The http block's settings, by the configuration's LuaMainConf: what timers use (OpenResty's fake request has them). */
const httpLevel = new WeakMap<object, LuaSocketConf>();

export function timerSocketSettings(main: object): SocketSettings {
  return socketSettings(httpLevel.get(main));
}

/** `used` marks the configuration as one that needs a Lua VM and gives its LuaMainConf. */
export function socketDirectives(used: (cf: ConfContext) => object): Directive[] {
  const list: Directive[] = [
    setting('lua_socket_connect_timeout', 'connectTimeout', msecArg),
    setting('lua_socket_send_timeout', 'sendTimeout', msecArg),
    setting('lua_socket_read_timeout', 'readTimeout', msecArg),
    setting('lua_socket_buffer_size', 'bufferSize', sizeArg),
    setting('lua_socket_pool_size', 'poolSize', countArg),
    setting('lua_socket_keepalive_timeout', 'keepaliveTimeout', msecArg),
    setting('lua_socket_log_errors', 'logErrors', flagArg, 'flag'),
    setting('lua_ssl_verify_depth', 'verifyDepth', countArg),
    setting('lua_ssl_trusted_certificate', 'trusted', (cf, v) => {
      const file = cf.confPath(v);
      try {
        return fs.readFileSync(file, 'latin1');
      } catch {
        throw cf.error(`SSL_CTX_load_verify_locations("${file}") failed`);
      }
    }),
  ];
  return list.map((d) => ({
    ...d,
    handler(cf, node) {
      const main = used(cf);
      if (cf.ctx === Ctx.HTTP) httpLevel.set(main, cf.get(luaSocketLoc));
      return d.handler(cf, node);
    },
  }));
}
