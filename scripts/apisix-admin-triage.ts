/**
 * A rough triage of APISIX's own Admin API tests (t/admin/*.t of a bare
 * apache/apisix mirror) against the gateway: each test block's literal
 * `t('/apisix/admin/...', ngx.HTTP_X, body, pattern)` calls are sent in
 * order to one gateway per file (paths and keys renamed /apisix → /gateway),
 * each answer folded as lib/test_admin.lua folds it (status >= 300: the
 * body; a pattern: "passed" when the answer holds it, else 500), and the
 * last call's code and body compared with the block's `--- error_code`
 * (default 200) and `--- response_body` / `--- response_body_like` /
 * `--- response_body eval qr/.../`. Blocks whose config does more than
 * literal calls and a final `ngx.say(body)`/`ngx.print(body)` are counted
 * as "not run". It is an estimate (blocks that print more than the last
 * body, or need a data plane, land in "differ").
 *
 * Usage: node tools/apisix-admin-triage.ts [FILE.t ...]   (VERBOSE=1 lists differing blocks)
 */
import { execFileSync } from 'node:child_process';
import * as net from 'node:net';
import { defaultYaml, startGateway, type Reply } from '../test/gateway/harness.ts';

const GIT = ['--git-dir=/work/.mirror/apache+apisix/repo'];
const git = (...a: string[]): string => execFileSync('git', [...GIT, ...a], { encoding: 'utf8', maxBuffer: 64 << 20 });

interface Call { path: string; method: string; body: string | undefined; pattern: string | undefined; raw?: boolean; bodyExpr?: Expr }
interface Block {
  name: string;
  /** A `--- request` block: one raw request, its answer as is. */
  raw?: Call;
  /** The evaluable statements of its content_by_lua_block. */
  stmts?: Stmt[];
  /** A block not evaluable: its literal calls still run, in order, for what they leave in the store. */
  effects: Call[];
  code: number;
  body?: string;
  like?: RegExp;
}

function parseString(src: string, i: number): [string, number] | undefined {
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

function skipWs(src: string, i: number): number {
  while (i < src.length && /[\s]/.test(src[i])) i++;
  return i;
}

/** One statement of a content_by_lua_block the triage can evaluate. */
type Expr = { str: string } | { name: string } | { num: number } | { bool: boolean } | { file: string }
  | { tbl: Array<[string | undefined, Expr]> } | { encode: Expr };
type Stmt =
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
function statements(src: string, i: number, nested: boolean): [Stmt[], number] | undefined {
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

function parseExpr(src: string, i: number): [Expr, number] | undefined {
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
function parseCall(src: string, i: number): [Call, number] | undefined {
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

function perlRegex(src: string): RegExp | undefined {
  const m = /^qr\/([\s\S]*)\/([a-z]*)\s*$/.exec(src.trim());
  if (!m) return undefined;
  try { return new RegExp(m[1].replace(/\\z/g, '$'), m[2].includes('s') ? 's' : ''); } catch { return undefined; }
}

function blocks(text: string): Block[] {
  const data = text.slice(text.indexOf('__DATA__'));
  const parts = data.split(/^=== /m).slice(1);
  return parts.map((part) => {
    const name = part.slice(0, part.indexOf('\n'));
    const sections = new Map<string, string>();
    for (const s of part.split(/^--- /m).slice(1)) {
      const nl = s.indexOf('\n');
      sections.set(s.slice(0, nl).trim().replace(/\s+/g, ' '), s.slice(nl + 1));
    }
    const code = Number(/^error_code: ?(\d+)/m.exec(part.split(/^--- /m).find((x) => x.startsWith('error_code')) ?? '')?.[1] ?? 200);
    const config = sections.get('config');
    const b: Block = { name, effects: config ? literalCalls(config) : [], code };
    const plain = !sections.has('yaml_config') && !sections.has('extra_yaml_config') && !sections.has('main_config');
    const lua = config !== undefined && plain ? /^\s*location \/t \{\s*content_by_lua_block \{([\s\S]*)\}\s*\}\s*$/.exec(config) : null;
    if (lua) b.stmts = statements(lua[1].replace(/^\s*--[^\n]*$/gm, ''), 0, false)?.[0];
    const req = sections.get('request');
    const rm = req !== undefined && config === undefined ? /^(GET|PUT|POST|PATCH|DELETE|OPTIONS|HEAD) (\/apisix\/admin\S*)[^\n]*\n?([\s\S]*)$/.exec(req.trim()) : null;
    if (rm && plain && !sections.has('more_headers')) b.raw = { method: rm[1], path: rm[2], body: rm[3] || undefined, pattern: undefined, raw: true };
    const rb = sections.get('response_body');
    const ev = sections.get('response_body eval');
    const like = sections.get('response_body_like');
    if (rb !== undefined) b.body = rb.replace(/\n+$/, '');
    else if (ev !== undefined) { const r = perlRegex(ev); if (r) b.like = r; else { b.stmts = undefined; b.raw = undefined; } }
    else if (like !== undefined) { try { b.like = new RegExp(like.trim()); } catch { b.stmts = undefined; b.raw = undefined; } }
    return b;
  });
}

function rename(s: string): string { return s.replace(/\/apisix\//g, '/gateway/'); }

function holds(pattern: unknown, data: unknown): boolean {
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
function literalCalls(config: string): Call[] {
  const out: Call[] = [];
  const re = /\bt\(/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(config))) { const c = parseCall(config, m.index + 2); if (c) out.push(c[0]); }
  return out;
}

class Unsupported extends Error {}

type Value = string | number | undefined | { table: unknown };

/** Runs the statements as lua-nginx would, t() as lib/test_admin.lua's test(): the status and the output. */
async function run(stmts: Stmt[], send: (c: Call) => Promise<{ status: number; text: string; json: unknown }>): Promise<{ status: number; out: string }> {
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

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

async function main(): Promise<void> {
  const files = process.argv.slice(2).length ? process.argv.slice(2) : git('ls-tree', '--name-only', 'HEAD', 't/admin/').split('\n').filter((f) => f.endsWith('.t')).map((f) => f.slice(8));
  let match = 0, differ = 0, notRun = 0;
  for (const f of files) {
    const text = git('show', `HEAD:t/admin/${f}`);
    const bs = blocks(text);
    // APISIX's test nginx has a stream proxy (stream routes are enabled) and,
    // unless a file's preprocessor sets an admin key, sends raw requests without one
    const preamble = text.slice(0, text.indexOf('__DATA__'));
    const keyed = /admin_key:/.test(preamble);
    let yaml = defaultYaml();
    if (keyed) yaml = yaml.replace(/      - name: viewer\n.*\n.*\n/, '');
    if (!/set_value\("yaml_config"/.test(preamble)) yaml = yaml.replace('apisix:\n', `apisix:\n  proxy_mode: http&stream\n  stream_proxy:\n    tcp:\n      - 127.0.0.1:${await freePort()}\n`);
    const gw = await startGateway({ yaml });
    const send = (c: Call): Promise<Reply> => gw.admin(c.method, rename(c.path), c.body);
    let fm = 0, fd = 0;
    try {
      for (const b of bs) {
        let code: number, got: string;
        try {
          if (b.raw) {
            const r = keyed ? await gw.admin(b.raw.method, rename(b.raw.path), b.raw.body, {}) : await send(b.raw);
            code = r.status; got = r.text;
          } else if (b.stmts) {
            const r = await run(b.stmts, send);
            code = r.status; got = r.out;
          } else throw new Unsupported('not evaluable');
        } catch (e) {
          if (!(e instanceof Unsupported)) throw e;
          if (!b.raw && !b.stmts) for (const c of b.effects) await send(c);
          notRun++;
          continue;
        }
        got = got.replace(/\n+$/, '');
        const same = (b.code === code || (b.code === 200 && code < 300)) &&
          (b.body !== undefined ? rename(b.body) === got : b.like ? new RegExp(rename(b.like.source), b.like.flags).test(got) : true);
        if (same) { match++; fm++; } else {
          differ++; fd++;
          if (process.env.VERBOSE) console.log(`  DIFF ${f} ${b.name}\n    want ${b.code} ${b.body ?? b.like}\n    got  ${code} ${got.slice(0, 400)}`);
        }
      }
    } finally { await gw.stop(); }
    console.log(`${f}: ${bs.length} blocks, ${fm} match, ${fd} differ`);
  }
  console.log(`total: ${match + differ + notRun} blocks, ${match} match, ${differ} differ, ${notRun} not run`);
}

await main();
