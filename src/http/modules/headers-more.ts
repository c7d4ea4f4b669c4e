/**
 * ngx_http_headers_more_filter_module (OpenResty's headers-more): set and
 * clear response headers in a header filter (`more_set_headers`,
 * `more_clear_headers`) and request headers in the rewrite phase
 * (`more_set_input_headers`, `more_clear_input_headers`), each limited by
 * `-s 'status …'` and `-t 'type …'` (and `-r`: replace only existing input
 * headers). A name ending in `*` in a clear matches every header it starts.
 * As a dynamic module's filter it runs before nginx's own filters, so
 * `add_header`'s headers come after it.
 */
import type { ConfContext } from '../../conf/context.ts';
import { defineSlot } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { DECLINED, httpMainOf } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';

/** One `Name: value` (value undefined: clear) of a directive. */
interface HeaderOp {
  name: string;
  lower: string;
  /** `X-Foo-*`: every header starting with `x-foo-`. */
  prefix: boolean;
  value: ComplexValue<HttpRequest> | undefined;
}

/** One directive: its headers and when it applies. */
interface Rule {
  ops: HeaderOp[];
  statuses: number[];
  types: string[];
  replaceOnly: boolean;
}

interface MoreLoc {
  out: Rule[];
  in: Rule[];
}

/** The location's own rules come after the ones it inherits (headers-more merges the lists). */
const moreLoc = defineSlot<MoreLoc>('headers_more', () => ({ out: [], in: [] }), (parent, child) => {
  child.out = [...parent.out, ...child.out];
  child.in = [...parent.in, ...child.in];
});

function readRule(cf: ConfContext, node: ConfNode, clear: boolean, input: boolean): Rule | string {
  const rule: Rule = { ops: [], statuses: [], types: [], replaceOnly: false };
  const vars = httpMainOf(cf).variables;
  const args = node.args;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '-s' || a === '-t') {
      const list = args[++i];
      if (list === undefined) return `: option ${a} takes an argument`;
      for (const word of list.split(/\s+/).filter(Boolean)) {
        if (a === '-t') rule.types.push(word.toLowerCase());
        else {
          const n = Number(word);
          if (!/^\d{3}$/.test(word)) return `: invalid status code "${word}"`;
          rule.statuses.push(n);
        }
      }
    } else if (a === '-r' && input) rule.replaceOnly = true;
    else if (a.startsWith('-') && a.length > 1 && !a.includes(':')) return `: invalid option name: "${a}"`;
    else {
      const colon = a.indexOf(':');
      const name = (colon < 0 ? a : a.slice(0, colon)).trim();
      const rawValue = colon < 0 ? '' : a.slice(colon + 1).trim();
      if (!name) return `: header name is empty: "${a}"`;
      const prefix = clear && name.endsWith('*');
      const bare = prefix ? name.slice(0, -1) : name;
      rule.ops.push({
        name: bare, lower: bare.toLowerCase(), prefix,
        value: clear || rawValue === '' ? undefined : compileComplex(cf, vars, rawValue) as ComplexValue<HttpRequest>,
      });
    }
  }
  return rule;
}

function directive(name: string, clear: boolean, input: boolean): Directive {
  return {
    name, contexts: Ctx.HTTP | Ctx.SERVER | Ctx.LOCATION | Ctx.LIF, args: [1, Infinity],
    handler(cf, node) {
      const rule = readRule(cf, node, clear, input);
      if (typeof rule === 'string') throw cf.error(`"${name}" directive${rule}`);
      cf.get(moreLoc)[input ? 'in' : 'out'].push(rule);
    },
  };
}

function typeMatches(rule: Rule, type: string | undefined): boolean {
  if (!rule.types.length) return true;
  const bare = (type ?? '').split(';')[0].trim().toLowerCase();
  return rule.types.includes(bare);
}

/** Response headers nginx keeps in fields of its own. */
function setOut(r: HttpRequest, op: HeaderOp, value: string | undefined): void {
  switch (op.lower) {
    case 'content-type': r.contentType = value; return;
    case 'content-length': r.contentLength = value === undefined ? undefined : Number(value); return;
    case 'last-modified': r.lastModified = value === undefined ? undefined : Date.parse(value); return;
    case 'server': r.ownServer = true; break;
    case 'date': r.ownDate = true; break;
  }
  r.setHeader(op.name, value === '' ? undefined : value);
}

function clearOut(r: HttpRequest, op: HeaderOp): void {
  if (!op.prefix) {
    setOut(r, op, undefined);
    return;
  }
  for (let i = r.headersOut.length - 1; i >= 0; i--) {
    if (r.headersOut[i].name.toLowerCase().startsWith(op.lower)) r.headersOut.splice(i, 1);
  }
  if ('content-type'.startsWith(op.lower)) r.contentType = undefined;
}

function headerFilter(r: HttpRequest): void {
  const rules = r.level.get(moreLoc).out;
  for (const rule of rules) {
    if (rule.statuses.length && !rule.statuses.includes(r.status)) continue;
    if (!typeMatches(rule, r.contentType)) continue;
    for (const op of rule.ops) {
      if (!op.value) clearOut(r, op);
      else setOut(r, op, op.value.evaluate(r));
    }
  }
}

/** Replaces (or removes) request header `name`, as headers-more does for input headers. */
function setIn(r: HttpRequest, op: HeaderOp, value: string | undefined, replaceOnly: boolean): void {
  const list = r.headersIn;
  let found = false;
  for (let i = list.length - 2; i >= 0; i -= 2) {
    const lower = list[i].toLowerCase();
    if (op.prefix ? lower.startsWith(op.lower) : lower === op.lower) {
      list.splice(i, 2);
      found = true;
    }
  }
  if (value === undefined || value === '' || (replaceOnly && !found)) return;
  list.push(op.name, value);
  if (op.lower === 'host') r.host = value.toLowerCase().replace(/:\d*$/, '');
}

function rewriteHandler(r: HttpRequest): number {
  const rules = r.level.get(moreLoc).in;
  for (const rule of rules) {
    if (!typeMatches(rule, r.header('content-type'))) continue;
    for (const op of rule.ops) setIn(r, op, op.value?.evaluate(r), rule.replaceOnly);
  }
  return DECLINED;
}

export const headersMoreModule: HttpModule = {
  name: 'ngx_http_headers_more_filter_module',
  directives: [
    directive('more_set_headers', false, false),
    directive('more_clear_headers', true, false),
    directive('more_set_input_headers', false, true),
    directive('more_clear_input_headers', true, true),
  ],
  postconfiguration(http) {
    // a dynamic module's header filter runs before nginx's own (add_header's headers come later)
    http.addHeaderFilter(70, headerFilter);
    // headers-more sets input headers at the end of the rewrite phase, before rewrite_by_lua
    http.addPhaseHandler('REWRITE', 900, rewriteHandler);
  },
};
