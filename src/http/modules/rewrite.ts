/**
 * ngx_http_rewrite_module: `return`, `rewrite`, `set`, `if`, `break`,
 * `rewrite_log`, `uninitialized_variable_warn`. A level's directives compile
 * once, at configuration time, into a program: a list of statements run in
 * order, `if` bodies being nested lists. Server-level programs run in the
 * server rewrite phase, location-level ones in the rewrite phase.
 *
 * An `if` inside a location is an anonymous location: when its condition
 * holds, the request moves to its level (its add_header, proxy_pass, ...)
 * and the rest of the program goes on, as in nginx.
 */
import { Level } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { DECLINED, DONE, httpMainOf } from '../http-conf.ts';
import type { HttpModule, HttpMainConf, LocationConf } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { requestLog } from '../request-log.ts';
import { sendSimple } from '../response.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue, VariableRegistry } from '../../core/variables.ts';
import { flagArg } from '../../conf/values.ts';
import { setting } from '../../conf/setters.ts';
import { enterAnonymous } from '../location.ts';
import { readAnonymousLocation } from '../core/structure.ts';
import { contentTypeFor } from '../core/types.ts';
import { compileCondition } from './rewrite/condition.ts';
import { NEXT, rewriteConf, runBlock } from './rewrite/program.ts';
import type { Code } from './rewrite/program.ts';
import { compileRewrite } from './rewrite/replacement.ts';

/** `if` levels: their statements go into the enclosing program's nested list. */
const ifBodies = new WeakMap<Level, Code[]>();

/** The statement list directives of the current block append to. */
export function program(cf: ConfContext): Code[] {
  const body = ifBodies.get(cf.level);
  if (body) return body;
  const conf = cf.get(rewriteConf);
  return (conf.codes ??= []);
}

function rewriteHandler(r: HttpRequest): number | Promise<number> {
  const codes = r.level.get(rewriteConf).codes;
  if (!codes) return DECLINED;
  const rc = runBlock(codes, 0, r);
  if (typeof rc === 'number') return rc === NEXT ? DECLINED : rc;
  return rc.then((v) => (v === NEXT ? DECLINED : v));
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

function returnCode(status: number, text: ComplexValue | undefined): Code {
  if (REDIRECTS.has(status)) {
    return (r) => {
      r.location = text ? text.evaluate(r) : '';
      return status;
    };
  }
  // without text, an error status goes to error_page / nginx's page
  if (text === undefined && status >= 400) return () => status;
  return async (r) => {
    // ngx_http_send_response sets the status before the text is evaluated ($status)
    r.status = status;
    // a type set before (X-Accel-Redirect keeps the upstream's) stays, as in ngx_http_set_content_type
    await sendSimple(r, status, text ? text.evaluate(r) : '', r.contentType ?? contentTypeFor(r));
    return DONE;
  };
}

function readReturn(cf: ConfContext, node: ConfNode): string | void {
  const vars = httpMainOf(cf).variables;
  const [first] = node.args;
  let second: string | undefined = node.args[1];
  let status = Number(first);
  if (!/^\d+$/.test(first)) {
    if (node.args.length === 2 || !/^(https?:\/\/|\$scheme)/.test(first)) throw cf.error(`invalid return code "${first}"`);
    status = 302;
    second = first;
  } else if (status > 999) {
    throw cf.error(`invalid return code "${first}"`);
  }
  program(cf).push(returnCode(status, second === undefined ? undefined : compileComplex(cf, vars, second)));
}

const breakCode: Code = (r) => {
  if (r.uriChanged) {
    r.validLocation = false;
    r.uriChanged = false;
  }
  return DECLINED;
};

function uninitialized(name: string) {
  return (r: HttpRequest) => {
    if (r.level.get(rewriteConf).warnUninitialized) requestLog(r).warn(`using uninitialized "${name}" variable`);
    return '';
  };
}

/**
 * The variable a `set`-like directive assigns (`$name`), defined as a user
 * variable when needed (also for set_by_lua); returns its index.
 */
export function setTarget(cf: ConfContext, target: string): number {
  const vars: VariableRegistry = httpMainOf(cf).variables;
  if (!target.startsWith('$')) throw cf.error(`invalid variable name "${target}"`);
  const name = target.slice(1);
  const def = vars.lookup(name);
  if (def && !def.prefix) {
    if (!def.changeable && !def.set) throw cf.error(`the duplicate "${name}" variable`);
  } else if (def) {
    // $http_x, $arg_x, ...: a variable of its own that reads as before until set
    vars.define({ name, get: (r) => def.get(r, name), changeable: true, noCache: def.noCache });
  } else {
    vars.define({ name, get: uninitialized(name), changeable: true });
  }
  return vars.index(name);
}

function readSet(cf: ConfContext, node: ConfNode): string | void {
  const vars: VariableRegistry = httpMainOf(cf).variables;
  const [target, value] = node.args;
  const index = setTarget(cf, target);
  const cv = compileComplex(cf, vars, value);
  const constant = cv.constant;
  program(cf).push(constant !== undefined
    ? (r) => { vars.assign(r, index, constant); return NEXT; }
    : (r) => { vars.assign(r, index, cv.evaluate(r)); return NEXT; });
}

function readIf(cf: ConfContext, node: ConfNode): string | void {
  const cond = compileCondition(cf, httpMainOf(cf).variables, node.args);
  const body: Code[] = [];
  let ifLoc: LocationConf | undefined;
  if (cf.ctx === Ctx.LOCATION) {
    const parent = cf.data.location as LocationConf;
    // the level is created by readAnonymousLocation; its statements must land in `body`
    const level = new Level(cf.level);
    ifBodies.set(level, body);
    ifLoc = readAnonymousLocation(cf, node, parent, Ctx.LIF, level);
    parent.children.push(ifLoc);
  } else {
    const level = new Level(cf.level);
    ifBodies.set(level, body);
    cf.block(node.children ?? [], Ctx.SIF, level, 'location', { location: undefined });
  }
  const loc = ifLoc;
  const enter = (r: HttpRequest): number | Promise<number> => {
    if (loc) enterAnonymous(r, loc);
    return runBlock(body, 0, r);
  };
  program(cf).push((r) => {
    const c = cond(r);
    if (typeof c === 'boolean') return c ? enter(r) : NEXT;
    return c.then((v) => (v ? enter(r) : NEXT));
  });
}

const IN_REWRITE = Ctx.SERVER | Ctx.SIF | Ctx.LOCATION | Ctx.LIF;

export const rewriteModule: HttpModule = {
  name: 'ngx_http_rewrite_module',
  directives: [
    { name: 'return', contexts: IN_REWRITE, args: [1, 2], handler: readReturn },
    {
      name: 'rewrite', contexts: IN_REWRITE, args: [2, 3],
      handler(cf, node) { program(cf).push(compileRewrite(cf, httpMainOf(cf).variables, node.args)); },
    },
    { name: 'break', contexts: IN_REWRITE, args: 0, handler(cf) { program(cf).push(breakCode); } },
    { name: 'if', contexts: Ctx.SERVER | Ctx.LOCATION, args: [1, Infinity], block: true, handler: readIf },
    { name: 'set', contexts: IN_REWRITE, args: 2, handler: readSet },
    { name: 'rewrite_log', contexts: Ctx.HTTP | IN_REWRITE, args: 'flag', handler: setting(rewriteConf, 'log', flagArg) },
    { name: 'uninitialized_variable_warn', contexts: Ctx.HTTP | IN_REWRITE, args: 'flag', handler: setting(rewriteConf, 'warnUninitialized', flagArg) },
  ],
  postconfiguration(http: HttpMainConf) {
    http.addPhaseHandler('SERVER_REWRITE', 100, rewriteHandler);
    // with no matching location the server's statements already ran in the server rewrite phase
    http.addPhaseHandler('REWRITE', 100, (r) => (r.loc === r.server.serverLoc ? DECLINED : rewriteHandler(r)));
  },
};
