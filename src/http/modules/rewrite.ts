/**
 * ngx_http_rewrite_module: `return` (and, to come, rewrite, set, if, break).
 * Directives compile into a small program per level; server-level programs
 * run in the server rewrite phase, location-level ones in the rewrite phase.
 */
import { defineSlot } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import { DECLINED, DONE, httpMainOf } from '../http-conf.ts';
import type { HttpModule, HttpMainConf } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { sendSimple } from '../response.ts';
import { compileComplex } from '../variables.ts';
import { coreLoc } from './core/settings.ts';
import type { ComplexValue } from '../variables.ts';

/** One compiled rewrite-module statement; returns DECLINED to go on, or a result. */
type Code = (r: HttpRequest) => number | Promise<number>;

interface RewriteConf {
  codes: Code[];
}

/** Not inherited: each level runs only its own statements, as in nginx. */
export const rewriteConf = defineSlot<RewriteConf>('rewrite', () => ({ codes: [] }));

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

function returnCode(status: number, text: ComplexValue | undefined): Code {
  return async (r) => {
    if (REDIRECTS.has(status) && text) {
      r.location = text.evaluate(r);
      return status;
    }
    // nginx sends a body for text, and an empty one for codes below 400 without text
    if (text === undefined && status >= 400) return status;
    await sendSimple(r, status, text ? text.evaluate(r) : '', r.level.get(coreLoc).defaultType);
    return DONE;
  };
}

async function runCodes(r: HttpRequest): Promise<number> {
  const conf = r.level.has(rewriteConf) ? r.level.get(rewriteConf) : undefined;
  if (!conf) return DECLINED;
  for (const code of conf.codes) {
    const rc = await code(r);
    if (rc !== DECLINED) return rc;
  }
  return DECLINED;
}

export const rewriteModule: HttpModule = {
  name: 'ngx_http_rewrite_module',
  directives: [
    {
      name: 'return', contexts: Ctx.SERVER | Ctx.LOCATION | Ctx.SIF | Ctx.LIF, args: [1, 2],
      handler(cf, node) {
        const http = httpMainOf(cf);
        let [first, second] = node.args;
        let status = Number(first);
        if (!/^\d+$/.test(first)) {
          if (node.args.length === 2 || !/^(https?:\/\/|\$scheme)/.test(first)) return `invalid return code "${first}"`;
          status = 302;
          second = first;
        } else if (status > 999) {
          return `invalid return code "${first}"`;
        }
        const text = second === undefined ? undefined : compileComplex(cf, http.variables, second);
        cf.get(rewriteConf).codes.push(returnCode(status, text));
      },
    },
  ],
  postconfiguration(http: HttpMainConf) {
    http.addPhaseHandler('SERVER_REWRITE', runCodes);
    // with no matching location the server's statements already ran in the server rewrite phase
    http.addPhaseHandler('REWRITE', (r) => (r.loc === r.server.serverLoc ? DECLINED : runCodes(r)));
  },
};
