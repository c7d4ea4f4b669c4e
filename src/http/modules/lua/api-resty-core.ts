/**
 * The host half of lua-resty-core's modules that OpenResty code requires by
 * name (resty-core.lua is the Lua half): ngx.process, ngx.errlog, ngx.base64,
 * resty.core.base's get_request and resty.core.time's monotonic clock. In
 * OpenResty these are FFI calls into the nginx binary; here the worker
 * (WorkerRuntime) and the error logs answer them.
 */
import fs from 'node:fs';
import { LuaError } from '../../../lua/bridge.ts';
import { mainErrorLog } from '../../../core/error-log.ts';
import { ngxDecodeBase64 } from '../../../core/base64.ts';
import type { ProcessRole } from '../../../core/messages.ts';
import type { HttpRequest } from '../../request.ts';
import { errorLogFor } from '../../request-log.ts';
import { currentContext, logFor } from './runtime.ts';
import type { LuaRuntime } from './runtime.ts';

/** What ngx.process asks of the worker it runs in. */
export interface LuaProcessHost {
  role: ProcessRole;
  /** `master_process on` (else ngx.process.type() is "single"). */
  masterProcess: boolean;
  requestPrivilegedAgent(): void;
  exitGracefully(): void;
}

/** A worker without a master's process management (the gateway's own Lua, tests). */
export const STANDALONE_PROCESS: LuaProcessHost = {
  role: 'worker', masterProcess: false, requestPrivilegedAgent: () => undefined, exitGracefully: () => undefined,
};

export function restyCoreLibrary(rt: LuaRuntime, proc: LuaProcessHost): Record<string, unknown> {
  const { bridge } = rt.vm;
  const tokens = new WeakMap<HttpRequest, number>();
  let nextToken = 1;
  const pushString = (L: number, s: string | undefined) => {
    if (s === undefined) bridge.pushNil(L);
    else bridge.pushString(L, s);
    return 1;
  };

  return {
    /** resty-core.lua's chunk: called with this table, it registers the modules. */
    chunk(L: number) {
      bridge.load(L, fs.readFileSync(new URL('resty-core.lua', import.meta.url)), 'resty/core.lua');
      return 1;
    },
    // ngx.process.type() outside init_by_lua (resty-core.lua answers for the init phase)
    process_type: (L: number) => pushString(L, proc.masterProcess ? proc.role : 'single'),
    master_process: (L: number) => (bridge.pushBoolean(L, proc.masterProcess), 1),
    enable_privileged_agent(L: number) {
      // in single-process mode nginx starts no agent (and says nothing)
      if (proc.masterProcess) proc.requestPrivilegedAgent();
      return 0;
    },
    signal_graceful_exit: () => (proc.exitGracefully(), 0),
    // workers are threads of the master's process
    master_pid: (L: number) => (bridge.pushInteger(L, process.pid), 1),
    /** ngx.errlog.get_sys_filter_level: the level of the request's error log, or the main one's. */
    sys_filter_level(L: number) {
      const r = currentContext(rt)?.r;
      bridge.pushInteger(L, (r ? errorLogFor(r) : mainErrorLog()).maxLevel);
      return 1;
    },
    /** ngx.errlog.raw_log: the message as given, without ngx.log's `[lua] file:line:` prefix. */
    raw_log(L: number) {
      const level = bridge.toInteger(L, 1) ?? -1;
      if (level < 0 || level > 8) throw new LuaError('bad log level', 2);
      logFor(currentContext(rt), level, bridge.toString(L, 2) ?? '');
      return 0;
    },
    decode_base64url(L: number) {
      const bytes = ngxDecodeBase64(bridge.toString(L, 1) ?? '', true);
      return pushString(L, bytes?.toString('latin1'));
    },
    encode_base64url: (L: number) => pushString(L, Buffer.from(bridge.toString(L, 1) ?? '', 'latin1').toString('base64url')),
    /** resty.core.base.get_request: a number that stands for the current request (nil outside one). */
    request_token(L: number) {
      const r = currentContext(rt)?.r;
      if (!r) return (bridge.pushNil(L), 1);
      let t = tokens.get(r);
      if (t === undefined) tokens.set(r, (t = nextToken++));
      bridge.pushInteger(L, t);
      return 1;
    },
    // nginx's ngx_current_msec: CLOCK_MONOTONIC in milliseconds
    monotonic_msec: (L: number) => (bridge.pushInteger(L, Number(process.hrtime.bigint() / 1_000_000n)), 1),
  };
}
