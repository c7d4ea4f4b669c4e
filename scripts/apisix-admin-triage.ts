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
import { startGateway } from '../test/gateway/harness.ts';

const GIT = ['--git-dir=/work/.mirror/apache+apisix/repo'];
const git = (...a: string[]): string => execFileSync('git', [...GIT, ...a], { encoding: 'utf8', maxBuffer: 64 << 20 });

interface Call { path: string; method: string; body: string | undefined; pattern: string | undefined; raw?: boolean }
interface Block { name: string; raw?: boolean; setsStatus?: boolean; calls: Call[] | undefined; code: number; body?: string; like?: RegExp }

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

/** The literal calls of a config, or undefined when it does anything else with the admin API. */
function calls(config: string): Call[] | undefined {
  const out: Call[] = [];
  const re = /\bt\(/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(config))) {
    let i = skipWs(config, m.index + 2);
    const p = parseString(config, i);
    if (!p) return undefined;
    i = skipWs(config, p[1]);
    const mm = /^,\s*ngx\.HTTP_(\w+)/.exec(config.slice(i));
    if (!mm) return undefined;
    i = skipWs(config, i + mm[0].length);
    const args: Array<string | undefined> = [];
    while (config[i] === ',' && args.length < 2) {
      i = skipWs(config, i + 1);
      if (config.startsWith('nil', i)) { args.push(undefined); i = skipWs(config, i + 3); continue; }
      const a = parseString(config, i);
      if (!a) return undefined;
      args.push(a[0]);
      i = skipWs(config, a[1]);
    }
    if (config[i] !== ')') return undefined;
    out.push({ path: p[0], method: mm[1], body: args[0], pattern: args[1] });
  }
  if (out.length === 0) return undefined;
  // only the plain endings: print the last call's body
  const tail = config.replace(/--[^\n]*/g, '');
  if (!/ngx\.(say|print)\((body|message)\)/.test(tail)) return undefined;
  if (/ngx\.say\((?!body|message)|require\("(?!lib\.test_admin)/.test(tail)) return undefined;
  return out;
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
    const b: Block = { name, calls: config && !sections.has('yaml_config') && !sections.has('extra_yaml_config') && !sections.has('main_config') ? calls(config) : undefined, code };
    const req = sections.get('request');
    const rm = req !== undefined && config === undefined ? /^(GET|PUT|POST|PATCH|DELETE|OPTIONS|HEAD) (\/apisix\/admin\S*)[^\n]*\n?([\s\S]*)$/.exec(req.trim()) : null;
    if (rm && !sections.has('yaml_config') && !sections.has('more_headers')) b.calls = [{ method: rm[1], path: rm[2], body: rm[3] || undefined, pattern: undefined, raw: true }];
    b.raw = b.calls?.[0]?.raw;
    b.setsStatus = config !== undefined && /ngx\.status\s*=/.test(config);
    const rb = sections.get('response_body');
    const ev = sections.get('response_body eval');
    const like = sections.get('response_body_like');
    if (rb !== undefined) b.body = rb.replace(/\n+$/, '');
    else if (ev !== undefined) { const r = perlRegex(ev); if (r) b.like = r; else b.calls = undefined; }
    else if (like !== undefined) { try { b.like = new RegExp(like.trim()); } catch { b.calls = undefined; } }
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

async function main(): Promise<void> {
  const files = process.argv.slice(2).length ? process.argv.slice(2) : git('ls-tree', '--name-only', 'HEAD', 't/admin/').split('\n').filter((f) => f.endsWith('.t')).map((f) => f.slice(8));
  let match = 0, differ = 0, notRun = 0;
  for (const f of files) {
    const bs = blocks(git('show', `HEAD:t/admin/${f}`));
    const gw = await startGateway();
    let fm = 0, fd = 0;
    try {
      for (const b of bs) {
        if (!b.calls) { notRun++; continue; }
        let code = 0, out = '';
        for (const c of b.calls) {
          const r = await gw.admin(c.method, rename(c.path), c.body);
          if (c.raw) { code = r.status; out = r.text; continue; }
          if (r.status >= 300 || c.pattern === undefined) { code = r.status; out = r.status >= 300 ? r.text : 'passed'; continue; }
          let pat: unknown;
          try { pat = JSON.parse(rename(c.pattern)); } catch { pat = undefined; }
          const ok = pat !== undefined && holds(pat, r.json);
          code = ok ? 200 : 500; out = ok ? 'passed' : `failed, ${r.text}`;
        }
        // a block that does not set ngx.status answers 200 whatever the calls got
        if (!b.raw && !b.setsStatus) code = 200;
        const got = out.replace(/\n+$/, '');
        const same = (b.code === code || (b.code === 200 && code < 300)) &&
          (b.body !== undefined ? rename(b.body) === got : b.like ? new RegExp(rename(b.like.source), b.like.flags).test(got) : true);
        if (same) { match++; fm++; } else {
          differ++; fd++;
          if (process.env.VERBOSE) console.log(`  DIFF ${f} ${b.name}\n    want ${b.code} ${b.body ?? b.like}\n    got  ${code} ${got.slice(0, 300)}`);
        }
      }
    } finally { await gw.stop(); }
    console.log(`${f}: ${bs.length} blocks, ${fm} match, ${fd} differ`);
  }
  console.log(`total: ${match + differ + notRun} blocks, ${match} match, ${differ} differ, ${notRun} not run`);
}

await main();
