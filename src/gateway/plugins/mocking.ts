/**
 * mocking (apisix/plugins/mocking.lua), in the access phase: answers
 * `response_status` with `response_example` (its `$vars` resolved), or a
 * body made up from `response_schema` (JSON for application/json and
 * text/plain, xml2lua's XML under a `data` root for application/xml and
 * text/xml), with `content_type`, `x-mock-by: APISIX/<version>` and
 * `response_headers` added, after `delay` seconds.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { GATEHOUSE_VERSION } from '../../core/version.ts';
import type { GatewayPlugin } from './registry.ts';
import { resolveVar } from './resolve-var.ts';

interface MockingConf {
  delay: number; response_status: number; content_type: string; response_example?: string;
  response_schema?: Record<string, unknown>; with_mock_header: boolean; response_headers?: Record<string, string | number>;
}

const SUPPORTED = new Set(['application/xml', 'application/json', 'text/plain', 'text/html', 'text/xml']);

/** The media type before `;` (the plugin's own parse: printable ASCII on both sides of the last `;`). */
function mediaType(contentType: string): string {
  const m = /^([ -~]*);([ -~]*)/.exec(contentType);
  return m ? m[1] : contentType;
}

const randInt = (lo: number, hi: number) => lo + Math.floor(Math.random() * (hi - lo + 1));

/** A number as Lua prints it and cjson encodes it (%.14g). */
function luaNumber(n: number): number {
  return Number.isInteger(n) ? n : Number(n.toPrecision(14));
}

type Value = string | number | boolean | Value[] | { [k: string]: Value };

function genObject(schema: Record<string, unknown>): { [k: string]: Value } {
  const out: { [k: string]: Value } = {};
  const props = schema.properties as Record<string, Record<string, unknown>> | undefined;
  if (!props || typeof props !== 'object') return out;
  for (const [k, v] of Object.entries(props)) {
    const x = gen(v);
    if (x !== undefined) out[k] = x;
  }
  return out;
}

function gen(p: Record<string, unknown>): Value | undefined {
  // a property without a string type fails in APISIX too (string.lower of it): a 500
  if (typeof p?.type !== 'string') throw new Error('mocking: a property of response_schema has no type');
  const ex = p.example;
  switch (p.type.toLowerCase()) {
    case 'array': {
      if (p.items == null) return undefined;
      const out: Value[] = [];
      for (let i = randInt(1, 3); i > 0; i--) {
        const x = gen(p.items as Record<string, unknown>);
        if (x !== undefined) out.push(x);
      }
      // cjson encodes an empty Lua table as an object
      return out.length ? out : {};
    }
    case 'object': return genObject(p);
    case 'string':
      return typeof ex === 'string' ? ex : Array.from({ length: randInt(1, 10) }, () => String.fromCharCode(randInt(97, 122))).join('');
    case 'number': return typeof ex === 'number' ? ex : luaNumber(Math.random() * 10000);
    case 'integer': return typeof ex === 'number' ? Math.floor(ex) : randInt(1, 10000);
    case 'boolean': return typeof ex === 'boolean' ? ex : Math.random() < 0.5;
    default: return undefined;
  }
}

const scalar = (v: Value) => (typeof v === 'number' ? String(luaNumber(v)) : String(v));

/** xml2lua 1.6's parseTableKeyToXml: one tag at `level` (two spaces each). */
function keyToXml(out: string[], tag: string, v: Value, level: number): void {
  const spaces = ' '.repeat(level * 2);
  let inner: string;
  if (typeof v === 'object') {
    const one = Array.isArray(v) && v.length === 1 && typeof v[0] !== 'object';
    inner = '\n' + (one ? spaces + scalar((v as Value[])[0]) : toXml(v, tag, level + 1)) + '\n' + spaces;
  } else inner = scalar(v);
  out.push(`${spaces}<${tag}>${inner}</${tag}>`);
}

/** xml2lua 1.6's toXml(tb, tableName, level), its indentation quirks kept. */
function toXml(tb: Value[] | { [k: string]: Value }, name: string, level = 1): string {
  const first = level;
  const out: string[] = level === 1 ? [`<${name}>`] : [];
  const entries: Array<[string | number, Value]> = Array.isArray(tb) ? tb.map((v, i) => [i + 1, v]) : Object.entries(tb);
  for (const [k, v] of entries) {
    if (typeof k === 'number') keyToXml(out, name, v, level);
    else if (typeof v !== 'object') keyToXml(out, k, v, level);
    else {
      level++;
      if (Array.isArray(v)) for (const sub of v) keyToXml(out, k, sub, level);
      else keyToXml(out, k, v, level);
    }
  }
  if (first === 1) out.push(`</${name}>\n`);
  return out.join('\n');
}

function lookupContent(conf: MockingConf): string {
  if (conf.response_example !== undefined) return conf.response_example;
  const output = genObject(conf.response_schema ?? {});
  const typ = mediaType(conf.content_type);
  if (typ === 'application/xml' || typ === 'text/xml') return toXml(output, 'data');
  if (typ === 'application/json' || typ === 'text/plain') return JSON.stringify(output);
  // APISIX logs that a schema body is only JSON or XML, and sends an empty body
  return '';
}

export const mocking: GatewayPlugin<MockingConf> = {
  name: 'mocking', version: 0.1, priority: 10900,
  schema: {
    type: 'object',
    properties: {
      delay: { type: 'integer', default: 0 },
      response_status: { type: 'integer', default: 200, minimum: 100 },
      content_type: { type: 'string', default: 'application/json;charset=utf8' },
      response_example: { type: 'string' },
      response_schema: { type: 'object' },
      with_mock_header: { type: 'boolean', default: true },
      response_headers: {
        type: 'object', minProperties: 1,
        patternProperties: { '^[^:]+$': { oneOf: [{ type: 'string' }, { type: 'number' }] } },
      },
    },
    anyOf: [{ required: ['response_example'] }, { required: ['response_schema'] }],
  },
  checkConf(conf) {
    return SUPPORTED.has(mediaType(conf.content_type)) ? undefined : 'unsupported content type!';
  },
  access(conf, ctx) {
    const content = lookupContent(conf);
    if (conf.with_mock_header) ctx.setResponseHeader('x-mock-by', `APISIX/${GATEHOUSE_VERSION}`);
    for (const [k, v] of Object.entries(conf.response_headers ?? {})) ctx.addResponseHeader(k, typeof v === 'string' ? resolveVar(v, ctx) : String(v));
    const answer = () => ({ status: conf.response_status, body: resolveVar(content, ctx), headers: { 'Content-Type': conf.content_type } });
    return conf.delay > 0 ? sleep(conf.delay * 1000).then(answer) : answer();
  },
};
