/**
 * What the APISIX test-file triages share (scripts/apisix-admin-triage.ts,
 * scripts/apisix-plugin-triage.ts): reading a .t file of the bare
 * apache/apisix mirror, splitting it into its `=== TEST` blocks and their
 * `--- section`s, and the small evaluator of a block's content_by_lua_block:
 * literal `t('/apisix/admin/...', ngx.HTTP_X, body, pattern)` calls (as
 * lib/test_admin.lua's test() folds their answers), `ngx.say`, `ngx.status`,
 * `if code >= 300`, `return`.
 */
import { execFileSync } from 'node:child_process';
import * as net from 'node:net';

const GIT = ['--git-dir=/work/.mirror/apache+apisix/repo'];
export const git = (...a: string[]): string => execFileSync('git', [...GIT, ...a], { encoding: 'utf8', maxBuffer: 64 << 20 });

export interface Call { path: string; method: string; body: string | undefined; pattern: string | undefined; raw?: boolean; bodyExpr?: Expr }

export function parseString(src: string, i: number): [string, number] | undefined {
  const m = /^\[(=*)\[/.exec(src.slice(i));
  if (m) {
    const close = `]${m[1]}]`;
    const end = src.indexOf(close, i + m[0].length);
    if (end < 0) return undefined;
    let s = src.slice(i + m[0].length, end);
    if (s.startsWith('\n')) s = s.slice(1);
    return [s, end + close.length];
  }
  const q = src[i];
  if (q !== "'" && q !== '"') return undefined;
  let s = '';
  for (let j = i + 1; j < src.length; j++) {
    if (src[j] === '\\') { const c = src[++j]; s += c === 'n' ? '\n' : c; continue; }
    if (src[j] === q) return [s, j + 1];
    s += src[j];
  }
  return undefined;
}

export function skipWs(src: string, i: number): number {
  while (i < src.length && /[\s]/.test(src[i])) i++;
  return i;
}

/** One statement of a content_by_lua_block the triage can evaluate. */
export type Expr = { str: string } | { name: string } | { num: number } | { bool: boolean } | { file: string }
  | { tbl: Array<[string | undefined, Expr]> } | { encode: Expr };
export type Stmt =
  | { kind: 'call'; vars: string[]; call: Call }
  | { kind: 'say'; args: Expr[]; nl: boolean }
  | { kind: 'status'; value: Expr }
  | { kind: 'if'; cond: { name: string; op: string; num: number }; then: Stmt[] }
  | { kind: 'return' }
  | { kind: 'assign'; name: string; value: Expr };

const IGNORED = [
  /^local\s+\w+\s*=\s*require\(?\s*["'](lib\.test_admin|toolkit\.json|apisix\.core|apisix\.core\.etcd|cjson)["']\s*\)?(\.\w+)?/,
  /^ngx\.sleep\(\s*[\d.]+\s*\)/,
  // the blocks' own checks of what etcd holds: the store is not etcd here
  /^(local\s+\w+\s*=\s*)?assert\(etcd\.[^\n]*/,
  /^local\s+\w+\s*=\s*res\.body\.node\.[\w.]+/,
  /^assert\(\w+ [~=]= nil, "[^"\n]*"\)/,
  /^local\s+\w+(\s*,\s*\w+)*\s*$/m,
];

/** Parse the statements of a Lua block from i until `end`/EOF; undefined when it holds anything else. */
export function statements(src: string, i: number, nested: boolean): [Stmt[], number] | undefined {
  const out: Stmt[] = [];
  for (;;) {
    i = skipWs(src, i);
    if (i >= src.length) return nested ? undefined : [out, i];
    const rest = src.slice(i);
    if (src[i] === ';') { i++; continue; }
    if (/^end\b/.test(rest)) return nested ? [out, i + 3] : undefined;
    const ig = IGNORED.map((r) => r.exec(rest)).find((m) => m && m.index === 0);
    if (ig) { i += ig[0].length; continue; }
    if (/^return\b/.test(rest)) { out.push({ kind: 'return' }); i += 6; continue; }
    let m = /^(?:local\s+)?(\w+(?:\s*,\s*\w+)*)\s*=\s*t(?:\.test)?\(/.exec(rest);
    if (m) {
      const c = parseCall(src, i + m[0].length);
      if (!c) return undefined;
      out.push({ kind: 'call', vars: m[1].split(/\s*,\s*/), call: c[0] });
      i = c[1];
      continue;
    }
    m = /^local\s+(\w+)\s*=\s*(?=t\.read_file\(|\{|["'\[])/.exec(rest);
    if (m) {
      const e = parseExpr(src, i + m[0].length);
      if (!e) return undefined;
      out.push({ kind: 'assign', name: m[1], value: e[0] });
      i = e[1];
      continue;
    }
    m = /^ngx\.status\s*=\s*/.exec(rest);
    if (m) {
      const e = parseExpr(src, i + m[0].length);
      if (!e) return undefined;
      out.push({ kind: 'status', value: e[0] });
      i = e[1];
      continue;
    }
    m = /^ngx\.(say|print)\(/.exec(rest);
    if (m) {
      const args: Expr[] = [];
      let j = skipWs(src, i + m[0].length);
      while (src[j] !== ')') {
        const e = parseExpr(src, j);
        if (!e) return undefined;
        args.push(e[0]);
        j = skipWs(src, e[1]);
        if (src[j] === ',') j = skipWs(src, j + 1);
        else if (src[j] !== ')') return undefined;
      }
      out.push({ kind: 'say', args, nl: m[1] === 'say' });
      i = j + 1;
      continue;
    }
    m = /^if\s+(\w+)\s*(>=|<=|~=|==|<|>)\s*(\d+)\s+then\b/.exec(rest);
    if (m) {
      const body = statements(src, i + m[0].length, true);
      if (!body) return undefined;
      out.push({ kind: 'if', cond: { name: m[1], op: m[2], num: Number(m[3]) }, then: body[0] });
      i = body[1];
      continue;
    }
    return undefined;
  }
}

export function parseExpr(src: string, i: number): [Expr, number] | undefined {
  i = skipWs(src, i);
  const s = parseString(src, i);
  if (s) return [{ str: s[0] }, s[1]];
  const rest = src.slice(i);
  let m = /^t\.read_file\(\s*"([^"]+)"\s*\)/.exec(rest);
  if (m) return [{ file: m[1] }, i + m[0].length];
  m = /^(?:core\.)?json\.encode\(\s*/.exec(rest);
  if (m) {
    const e = parseExpr(src, i + m[0].length);
    if (!e) return undefined;
    const j = skipWs(src, e[1]);
    return src[j] === ')' ? [{ encode: e[0] }, j + 1] : undefined;
  }
  m = /^(true|false)\b/.exec(rest);
  if (m) return [{ bool: m[1] === 'true' }, i + m[0].length];
  if (src[i] === '{') {
    const tbl: Array<[string | undefined, Expr]> = [];
    let j = skipWs(src, i + 1);
    while (src[j] !== '}') {
      const k = /^(?:([A-Za-z_]\w*)|\[\s*"([^"]*)"\s*\])\s*=(?!=)/.exec(src.slice(j));
      if (k) j += k[0].length;
      const e = parseExpr(src, j);
      if (!e) return undefined;
      tbl.push([k ? (k[1] ?? k[2]) : undefined, e[0]]);
      j = skipWs(src, e[1]);
      if (src[j] === ',' || src[j] === ';') j = skipWs(src, j + 1);
      else if (src[j] !== '}') return undefined;
    }
    return [{ tbl }, j + 1];
  }
  m = /^(\d+)\b|^([A-Za-z_]\w*)\b(?![.(\[:])/.exec(rest);
  if (!m) return undefined;
  return [m[1] !== undefined ? { num: Number(m[1]) } : { name: m[2] }, i + m[0].length];
}

/** `t(` already read: path, ngx.HTTP_X, then up to two strings or nil. */
export function parseCall(src: string, i: number): [Call, number] | undefined {
  i = skipWs(src, i);
  const p = parseString(src, i);
  if (!p) return undefined;
  i = skipWs(src, p[1]);
  const mm = /^,\s*ngx\.HTTP_(\w+)/.exec(src.slice(i));
  if (!mm) return undefined;
  i = skipWs(src, i + mm[0].length);
  const args: Array<string | undefined> = [];
  let bodyExpr: Expr | undefined;
  while (src[i] === ',' && args.length < 2) {
    i = skipWs(src, i + 1);
    if (src.startsWith('nil', i)) { args.push(undefined); i = skipWs(src, i + 3); continue; }
    const a = parseString(src, i);
    if (!a) {
      const e = args.length === 0 ? parseExpr(src, i) : undefined;
      if (!e) return undefined;
      bodyExpr = e[0];
      args.push(undefined);
      i = skipWs(src, e[1]);
      continue;
    }
    args.push(a[0]);
    i = skipWs(src, a[1]);
  }
  if (src[i] === ',') i = skipWs(src, i + 1);
  if (src[i] !== ')') return undefined;
  return [{ path: p[0], method: mm[1], body: args[0], pattern: args[1], bodyExpr }, i + 1];
}

export function perlRegex(src: string): RegExp | undefined {
  const m = /^qr\/([\s\S]*)\/([a-z]*)\s*$/.exec(src.trim());
  if (!m) return undefined;
  try { return new RegExp(m[1].replace(/\\z/g, '$'), m[2].includes('s') ? 's' : ''); } catch { return undefined; }
}

export function rename(s: string): string { return s.replace(/\/apisix\//g, '/gateway/'); }

export function holds(pattern: unknown, data: unknown): boolean {
  if (pattern && typeof pattern === 'object') {
    for (const [k, v] of Object.entries(pattern)) {
      const d = (data as Record<string, unknown> | undefined)?.[k];
      if (v === null) { if (d !== undefined && d !== null) return false; continue; }
      if (typeof v === 'object' && d) { if (!holds(v, d)) return false; continue; }
      if (v !== d) return false;
    }
    return true;
  }
  return pattern === data;
}

/** Every literal t(...) call of a config, in source order. */
export function literalCalls(config: string): Call[] {
  const out: Call[] = [];
  const re = /\bt\(/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(config))) { const c = parseCall(config, m.index + 2); if (c) out.push(c[0]); }
  return out;
}

export class Unsupported extends Error {}

export type Value = string | number | undefined | { table: unknown };

/** Runs the statements as lua-nginx would, t() as lib/test_admin.lua's test(): the status and the output. */
export async function run(stmts: Stmt[], send: (c: Call) => Promise<{ status: number; text: string; json: unknown }>): Promise<{ status: number; out: string }> {
  const vars = new Map<string, Value>();
  let status = 200, out = '', sent = false;
  const lua = (e: Expr): unknown => {
    if ('str' in e) return e.str;
    if ('num' in e) return e.num;
    if ('bool' in e) return e.bool;
    if ('file' in e) return git('show', `HEAD:${e.file}`);
    if ('encode' in e) return JSON.stringify(lua(e.encode));
    if ('tbl' in e) {
      if (e.tbl.every(([k]) => k === undefined)) return e.tbl.map(([, v]) => lua(v));
      return Object.fromEntries(e.tbl.map(([k, v]) => [k, lua(v)]));
    }
    const v = vars.get(e.name);
    return v !== null && typeof v === 'object' ? v.table : v;
  };
  const val = (e: Expr): Value => {
    if ('name' in e) return vars.get(e.name);
    const v = lua(e);
    return typeof v === 'string' || typeof v === 'number' || v === undefined ? v : { table: v };
  };
  const show = (v: Value): string => {
    if (v === undefined) return 'nil';
    if (typeof v === 'object') throw new Unsupported('a table printed');
    return String(v);
  };
  const exec = async (list: Stmt[]): Promise<boolean> => {
    for (const s of list) {
      if (s.kind === 'return') return false;
      if (s.kind === 'assign') { vars.set(s.name, val(s.value)); continue; }
      if (s.kind === 'call') {
        let call = s.call;
        if (call.bodyExpr) {
          const b = lua(call.bodyExpr);
          call = { ...call, body: typeof b === 'string' ? b : JSON.stringify(b) };
        }
        const r = await send(call);
        let res: Value[];
        if (r.status >= 300) res = [r.status, r.text];
        else if (s.call.pattern === undefined) res = [r.status, 'passed', r.text];
        else {
          let pat: unknown;
          try { pat = JSON.parse(rename(s.call.pattern).replace(/,(\s*[}\]])/g, '$1')); } catch { pat = undefined; }
          res = pat !== undefined && holds(pat, r.json) ? [200, 'passed', { table: r.json }] : [500, `failed, ${r.text}`, { table: r.json }];
        }
        s.vars.forEach((v, i) => vars.set(v, res[i]));
      } else if (s.kind === 'status') {
        const v = val(s.value);
        if (typeof v !== 'number') throw new Unsupported('ngx.status of a non-number');
        if (!sent) status = v;
      } else if (s.kind === 'say') {
        out += s.args.map((a) => show(val(a))).join('') + (s.nl ? '\n' : '');
        sent = true;
      } else {
        const v = vars.get(s.cond.name);
        const n = s.cond.num;
        const op = s.cond.op;
        if (op === '~=' || op === '==') { if ((v === n) !== (op === '==')) continue; }
        else {
          if (typeof v !== 'number') throw new Unsupported('a comparison of a non-number');
          if (!(op === '>=' ? v >= n : op === '<=' ? v <= n : op === '<' ? v < n : v > n)) continue;
        }
        const yes = true;
        if (yes && !(await exec(s.then))) return false;
      }
    }
    return true;
  };
  await exec(stmts);
  return { status, out };
}

export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}


/** One `=== TEST` block: its name, its whole text, and its sections by header (`response_body eval`...). */
export interface RawBlock { name: string; text: string; sections: Map<string, string> }

export function splitBlocks(text: string): RawBlock[] {
  const data = text.slice(text.indexOf('__DATA__'));
  return data.split(/^=== /m).slice(1).map((part) => {
    const sections = new Map<string, string>();
    for (const s of part.split(/^--- /m).slice(1)) {
      const nl = s.indexOf('\n');
      sections.set(s.slice(0, nl).trim().replace(/\s+/g, ' '), s.slice(nl + 1));
    }
    return { name: part.slice(0, part.indexOf('\n')), text: part, sections };
  });
}

/** The block's content_by_lua_block statements, when its config is one `location /t` of evaluable ones. */
export function configStatements(config: string | undefined): Stmt[] | undefined {
  const lua = config !== undefined ? /^\s*location \/t \{\s*content_by_lua_block \{([\s\S]*)\}\s*\}\s*$/.exec(config) : null;
  return lua ? statements(lua[1].replace(/^\s*--[^\n]*$/gm, ''), 0, false)?.[0] : undefined;
}
