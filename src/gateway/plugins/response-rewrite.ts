/**
 * response-rewrite (apisix/plugins/response-rewrite.lua): when its `vars`
 * hold for the response (all responses without), the status becomes
 * `status_code`, headers are `add`ed (`"Name: value"`), `set` and
 * `remove`d (or the older flat `{name: value}` form, set), values with
 * `$var`s; `body` (base64-decoded with `body_base64`) replaces the body,
 * which then goes out without a length, as APISIX's; or `filters` (PCRE
 * patterns with ngx.re's options, `once` or `global`, `$0`/`$1`/`${1}` in
 * the replacement) rewrite the whole body once it is in.
 */
import { compile } from '../../lua/re.ts';
import { compileVars } from '../router/expr.ts';
import type { Expr } from '../router/expr.ts';
import type { PluginContext } from './phase-api.ts';
import { capturesOf, expandTemplate } from './regex-sub.ts';
import type { GatewayPlugin } from './registry.ts';
import { resolveVar } from './resolve-var.ts';

interface Ops { add?: string[]; set?: Record<string, string>; remove?: string[] }
interface Filter { regex: string; scope: 'once' | 'global'; replace: string; options: string }
interface ResponseRewriteConf {
  status_code?: number; body?: string; body_base64: boolean; headers?: Ops | Record<string, string>; vars?: unknown[]; filters?: Filter[];
  max_resp_body_size: number;
}

const MATCHED = {};
/** Per request: the body's pieces held until its end (APISIX's hold_body_chunk). */
const HELD = {};

/** The filters over the whole body, as latin1 text (bytes as the PCRE engine sees them). */
function filtered(filters: Filter[], body: Buffer): Buffer {
  let text = body.toString('latin1');
  for (const f of filters) {
    let c: ReturnType<typeof compile>;
    try {
      c = compile(f.regex, f.options);
    } catch {
      continue;
    }
    const re = c.regex;
    const sub = (m: RegExpExecArray) => expandTemplate(f.replace, capturesOf(m, c.pattern.captures));
    re.lastIndex = 0;
    if (f.scope === 'once') {
      const m = re.exec(text);
      if (m) text = text.slice(0, m.index) + sub(m) + text.slice(m.index + m[0].length);
    } else {
      let out = '';
      let at = 0;
      for (const m of text.matchAll(re)) {
        out += text.slice(at, m.index) + sub(m);
        at = m.index + m[0].length;
      }
      text = out + text.slice(at);
    }
  }
  return Buffer.from(text, 'latin1');
}

const compiled = new WeakMap<object, Expr | undefined>();

function matched(conf: ResponseRewriteConf, ctx: PluginContext): boolean {
  if (!conf.vars) return true;
  if (!compiled.has(conf)) compiled.set(conf, compileVars(conf.vars));
  const test = compiled.get(conf);
  return test ? test(ctx.variable) : true;
}

function isOps(h: ResponseRewriteConf['headers']): h is Ops {
  return !!h && (Array.isArray(h.add) || (typeof h.set === 'object' && h.set !== null) || Array.isArray(h.remove));
}

export const responseRewrite: GatewayPlugin<ResponseRewriteConf> = {
  name: 'response-rewrite', version: 0.1, priority: 899,
  schema: {
    type: 'object',
    properties: {
      headers: {
        anyOf: [
          { type: 'object', minProperties: 1, properties: {
            add: { type: 'array', minItems: 1, items: { type: 'string', pattern: '^[^:]+:[^:]*[^/]$' } },
            set: { type: 'object', minProperties: 1, patternProperties: { '^[^:]+$': { oneOf: [{ type: 'string' }, { type: 'number' }] } } },
            remove: { type: 'array', minItems: 1, items: { type: 'string', pattern: '^[^:]+$' } },
          } },
          { type: 'object', patternProperties: { '^[^:]+$': { oneOf: [{ type: 'string' }, { type: 'number' }] } } },
        ],
      },
      body: { type: 'string' },
      body_base64: { type: 'boolean', default: false },
      max_resp_body_size: { type: 'integer', minimum: 1, default: 67108864 },
      status_code: { type: 'integer', minimum: 200, maximum: 598 },
      vars: { type: 'array' },
      filters: {
        type: 'array', minItems: 1,
        items: {
          type: 'object', required: ['regex', 'replace'],
          properties: {
            regex: { type: 'string', minLength: 1 },
            scope: { type: 'string', enum: ['once', 'global'], default: 'once' },
            replace: { type: 'string' },
            options: { type: 'string', default: 'jo' },
          },
        },
      },
    },
    dependencies: { body_base64: ['body'], body: { not: { required: ['filters'] } }, filters: { not: { required: ['body'] } } },
  },
  checkConf(conf) {
    for (const f of conf.filters ?? []) {
      try {
        compile(f.regex, f.options ?? 'jo');
      } catch (e) {
        return `regex "${f.regex}" validation failed: ${(e as Error).message}`;
      }
    }
    return undefined;
  },
  headerFilter(conf, ctx) {
    if (!matched(conf, ctx)) return;
    ctx.state.set(MATCHED, true);
    if (conf.status_code !== undefined) ctx.status = conf.status_code;
    const h = conf.headers;
    if (!h) return;
    if (!isOps(h)) {
      for (const [name, v] of Object.entries(h)) ctx.setResponseHeader(name, resolveVar(String(v), ctx));
      return;
    }
    for (const line of h.add ?? []) {
      const m = /^([^:\s]+)\s*:\s*([^:]+)$/.exec(line);
      if (m) ctx.addResponseHeader(m[1], resolveVar(m[2], ctx));
    }
    for (const [name, v] of Object.entries(h.set ?? {})) ctx.setResponseHeader(name, resolveVar(String(v), ctx));
    for (const name of h.remove ?? []) ctx.setResponseHeader(name, undefined);
  },
  filtersBody: (conf, ctx) => conf.filters !== undefined && ctx.state.get(MATCHED) === true,
  bodyFilter(conf, ctx, piece) {
    let held = ctx.state.get(HELD) as { pieces: Buffer[]; bytes: number } | undefined;
    if (!held) ctx.state.set(HELD, (held = { pieces: [], bytes: 0 }));
    if (piece.chunk.length) { held.pieces.push(piece.chunk); held.bytes += piece.chunk.length; }
    // max_resp_body_size: what is over it is cut, and the body ends there (hold_body_chunk)
    const full = held.bytes >= conf.max_resp_body_size;
    if (!piece.eof && !full) return { chunk: Buffer.alloc(0), eof: false };
    // the filters' defaults are one level down: filled in here
    const filters = conf.filters!.map((f) => ({ ...f, scope: f.scope ?? 'once', options: f.options ?? 'jo' }));
    return { chunk: filtered(filters, Buffer.concat(held.pieces).subarray(0, conf.max_resp_body_size)), eof: true };
  },
  replaceBody(conf, ctx) {
    if (conf.body === undefined || !ctx.state.get(MATCHED)) return undefined;
    return conf.body_base64 ? Buffer.from(conf.body, 'base64') : Buffer.from(conf.body);
  },
};
