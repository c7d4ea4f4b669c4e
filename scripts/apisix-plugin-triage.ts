/**
 * A rough triage of APISIX's plugin tests (t/plugin/*.t of a bare
 * apache/apisix mirror) against the gateway's data plane. Per file one
 * gateway (test/gateway/harness.ts) and, for the whole run, APISIX's own test
 * upstream t/lib/server.lua on 127.0.0.1:1980-1982 (scripts/apisix-origin.ts).
 * Per block, in order: its literal admin calls run as the admin triage runs
 * them ("setup" blocks: a `location /t` of admin calls); then its
 * `--- request` (or `--- pipelined_requests`, one connection per request)
 * goes to the gateway's proxy port as Test::Nginx sends it (Host: localhost,
 * Connection: close, `--- more_headers`), and the answer is compared with
 * `--- error_code`, `--- response_body` (exact, `eval`, `_like`) and
 * `--- response_headers` (`_like`). Blocks needing more than that (their own
 * nginx config, yaml, logs only, Lua beyond the admin calls) are "not
 * evaluable"; their literal admin calls still run.
 *
 * Usage: node scripts/apisix-plugin-triage.ts [NAME.t ...]   (VERBOSE=1: each difference)
 *        APISIX_HOME=/tmp/apisix (an export of the mirror: server.lua runs from there)
 */
import * as net from 'node:net';
import { defaultYaml, startGateway } from '../test/gateway/harness.ts';
import type { Gateway } from '../test/gateway/harness.ts';
import { startApisixOrigin } from './apisix-origin.ts';
import { configStatements, git, literalCalls, rename, run, splitBlocks, Unsupported } from './apisix-t-blocks.ts';
import type { Call, RawBlock } from './apisix-t-blocks.ts';
import { perlValue } from './perl-values.ts';
import type { PerlValue } from './perl-values.ts';

/** Sections the triage understands, or that only check logs and timing (not compared). */
const KNOWN = new Set(['config', 'request', 'request eval', 'pipelined_requests eval', 'more_headers', 'error_code', 'error_code eval',
  'response_body', 'response_body eval', 'response_body chomp', 'response_body_like', 'response_body_like eval',
  'response_headers', 'response_headers_like', 'error_log', 'error_log eval', 'no_error_log', 'no_error_log eval',
  'grep_error_log eval', 'grep_error_log_out', 'grep_error_log_out eval', 'wait', 'timeout', 'log_level', 'ONLY', 'error_log_like eval']);

interface Expect { code: number; body?: string; like?: RegExp; headers: Array<[string, string | undefined]>; headersLike: Array<[string, RegExp]> }
interface Request { method: string; path: string; body: string; headers: Array<[string, string]> }
interface Answer { status: number; headers: Map<string, string[]>; body: string }

type Kind = 'setup' | 'match' | 'differ' | 'not evaluable';

/** Test::Base's trim filter: leading blank lines go, and whatever blank follows the last newline. */
const trimmed = (s: string): string => s.replace(/^([ \t]*\n)+/, '').replace(/(?<=\n)\s*$/, '');

/** The i-th of n expectations: an array's item, or the one value when there is one request (as Test::Nginx). */
function indexed(v: PerlValue, i: number, n: number): PerlValue | undefined {
  if (Array.isArray(v)) return v[i];
  return n > 1 ? undefined : v;
}

function headerLines(text: string | undefined): Array<[string, string | undefined]> {
  if (!text) return [];
  return text.split('\n').filter((l) => l.trim()).map((l) => {
    if (l.startsWith('!')) return [l.slice(1).trim(), undefined];
    const c = l.indexOf(':');
    // `Name:` with nothing after it: Perl's split leaves the value undefined, so the header must be absent
    const v = l.slice(c + 1).trim();
    return [l.slice(0, c).trim(), v === '' && c >= 0 ? undefined : v];
  });
}

function parseRequest(text: string): Request | undefined {
  // as Test::Nginx: leading blanks and # comment lines before the request line go
  text = text.replace(/^(\s*#[^\n]*\n|\s+)+/, '');
  const nl = text.indexOf('\n');
  const first = (nl < 0 ? text : text.slice(0, nl)).trim().split(/ +/);
  if (!first[0]) return undefined;
  return { method: first[0], path: first[1] ?? '/', body: nl < 0 ? '' : text.slice(nl + 1), headers: [] };
}

/** The requests of a block and what each answer should be; a string: why it is not evaluable. */
function plan(b: RawBlock, port: number, defaultRequest: string | undefined): { reqs: Request[]; expects: Expect[] } | string {
  // `--- error_code: 400`: a section whose value is on its header line
  const s = new Map([...b.sections].map(([k, v]) => {
    const one = /^([\w ]+?): (.*)$/.exec(k);
    return one ? [one[1], `${one[2]}\n${v}`] : [k, v];
  }));
  const unknown = [...s.keys()].find((k) => !KNOWN.has(k));
  if (unknown) return `--- ${unknown}`;
  let reqTexts: string[];
  if (s.has('pipelined_requests eval')) {
    const v = perlValue(s.get('pipelined_requests eval')!);
    if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) return 'pipelined_requests';
    reqTexts = v as string[];
  } else if (s.has('request eval')) {
    const v = perlValue(s.get('request eval')!);
    if (typeof v === 'string') reqTexts = [v];
    else if (Array.isArray(v) && v.every((x) => typeof x === 'string')) reqTexts = v as string[];
    else return 'request eval';
  } else if (s.has('request')) reqTexts = [trimmed(s.get('request')!)];
  else if (defaultRequest !== undefined) reqTexts = [defaultRequest];
  else return 'no request';
  const reqs = reqTexts.map(parseRequest);
  if (reqs.some((r) => !r)) return 'request line';
  const more = headerLines(s.get('more_headers')).filter((h): h is [string, string] => h[1] !== undefined);
  for (const r of reqs as Request[]) r.headers = more;
  const n = reqs.length;
  const val = (name: string): PerlValue | undefined | null => {
    const t = s.get(`${name} eval`);
    if (t === undefined) return null;
    return perlValue(t);
  };
  const codes = val('error_code');
  const bodies = val('response_body');
  const likes = val('response_body_like');
  if (codes === undefined || bodies === undefined || likes === undefined) return 'an eval section';
  const expects: Expect[] = [];
  const ported = (x: string) => x.replace(/\$ServerPort\b/g, String(port));
  for (let i = 0; i < n; i++) {
    const e: Expect = { code: 200, headers: headerLines(s.get('response_headers')), headersLike: [] };
    if (codes !== null) { const c = indexed(codes, i, n); if (typeof c !== 'number') return 'error_code eval'; e.code = c; }
    else if (s.has('error_code')) e.code = Number(s.get('error_code')!.trim());
    if (bodies !== null) {
      const v = indexed(bodies, i, n);
      if (typeof v === 'string') e.body = ported(v); else if (v instanceof RegExp) e.like = v; else return 'response_body eval';
    } else if (s.has('response_body')) e.body = ported(trimmed(s.get('response_body')!));
    else if (s.has('response_body chomp')) e.body = ported(trimmed(s.get('response_body chomp')!).replace(/\n$/, ''));
    if (likes !== null) {
      const v = indexed(likes, i, n);
      try { e.like = v instanceof RegExp ? v : typeof v === 'string' ? new RegExp(v, 's') : undefined; } catch { return 'response_body_like'; }
      if (!e.like) return 'response_body_like eval';
    } else if (s.has('response_body_like')) {
      try { e.like = new RegExp(ported(s.get('response_body_like')!.trim()), 's'); } catch { return 'response_body_like'; }
    }
    for (const [k, v] of headerLines(s.get('response_headers_like'))) {
      try { e.headersLike.push([k, new RegExp(`^${v ?? ''}$`)]); } catch { return 'response_headers_like'; }
    }
    expects.push(e);
  }
  return { reqs: reqs as Request[], expects };
}

/** One request as Test::Nginx writes it, on its own connection; the whole answer once the gateway closes it. */
function send(port: number, r: Request): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const has = (name: string, value = /./) => r.headers.some(([k, v]) => k.toLowerCase() === name && value.test(v));
    // Test::Nginx trims a body it counts itself (not a chunked one, nor one the headers give a length)
    const body = Buffer.from(has('content-length') || has('transfer-encoding', /chunked/i) ? r.body : r.body.trim());
    const own = (name: string) => r.headers.some(([k]) => k.toLowerCase() === name);
    const head = [`${r.method} ${r.path} HTTP/1.1`, ...own('host') ? [] : ['Host: localhost'], ...own('connection') ? [] : ['Connection: close'],
      ...r.headers.map(([k, v]) => `${k}: ${v}`)];
    if (body.length && !has('content-length') && !has('transfer-encoding', /chunked/i)) head.push(`Content-Length: ${body.length}`);
    const sock = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    sock.setTimeout(10_000, () => sock.destroy(new Error('no answer in 10 s')));
    sock.on('data', (c: Buffer) => chunks.push(c));
    sock.on('error', reject);
    sock.on('close', () => {
      const raw = Buffer.concat(chunks);
      const end = raw.indexOf('\r\n\r\n');
      if (end < 0) { resolve({ status: 0, headers: new Map(), body: raw.toString() }); return; }
      const lines = raw.subarray(0, end).toString('latin1').split('\r\n');
      const headers = new Map<string, string[]>();
      for (const l of lines.slice(1)) {
        const c = l.indexOf(':');
        const k = l.slice(0, c).trim().toLowerCase();
        headers.set(k, [...headers.get(k) ?? [], l.slice(c + 1).trim()]);
      }
      let rest = raw.subarray(end + 4);
      if (r.method === 'HEAD') rest = Buffer.alloc(0);
      else if (headers.get('transfer-encoding')?.[0] === 'chunked') {
        const parts: Buffer[] = [];
        for (let i = 0; ;) {
          const e = rest.indexOf('\r\n', i);
          const size = parseInt(rest.subarray(i, e).toString(), 16);
          if (!(size > 0)) break;
          parts.push(rest.subarray(e + 2, e + 2 + size));
          i = e + 2 + size + 2;
        }
        rest = Buffer.concat(parts);
      }
      resolve({ status: Number(lines[0].split(' ')[1]), headers, body: rest.toString() });
    });
    sock.write(Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`, 'latin1'), body]));
  });
}

/** What differs between an answer and its expectation ('' when nothing does). */
function compare(a: Answer, e: Expect): string {
  const out: string[] = [];
  if (a.status !== e.code) out.push(`status ${a.status}, want ${e.code}`);
  if (e.body !== undefined && a.body !== e.body) out.push(`body ${JSON.stringify(a.body.slice(0, 300))}, want ${JSON.stringify(e.body.slice(0, 300))}`);
  if (e.like && !e.like.test(a.body)) out.push(`body ${JSON.stringify(a.body.slice(0, 300))}, want like ${e.like}`);
  for (const [k, v] of e.headers) {
    const got = a.headers.get(k.toLowerCase())?.join(', ');
    if (v === undefined ? got !== undefined : (got ?? '') !== v) out.push(`header ${k}: ${got ?? '(none)'}, want ${v ?? '(none)'}`);
  }
  for (const [k, re] of e.headersLike) {
    const got = a.headers.get(k.toLowerCase())?.join(', ') ?? '';
    if (!re.test(got)) out.push(`header ${k}: ${got}, want like ${re}`);
  }
  return out.join('; ');
}

/** The locations a block's config defines (a request to one of them is answered by APISIX's test nginx, not the gateway). */
const locations = (config: string | undefined): string[] => [...(config ?? '').matchAll(/location\s+(?:=\s*)?(\S+)\s*\{/g)].map((m) => m[1]);

let syncs = 0;

/** After admin writes: wait until the workers route a sentinel route changed last (so every earlier write applied too). */
async function synced(gw: Gateway): Promise<void> {
  const uri = `/__triage_sync_${++syncs}`;
  await gw.admin('PUT', '/gateway/admin/routes/__triage_sync', { uri, plugins: { 'mocking': { response_example: 'synced' } }, upstream: { type: 'roundrobin', nodes: { '127.0.0.1:1980': 1 } } });
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const a = await send(gw.proxyPort, { method: 'GET', path: uri, body: '', headers: [] });
    if (a.status === 200) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error('an admin change did not reach the data plane in 10 s');
}

async function triage(f: string, gw: Gateway, out: Record<Kind, number>): Promise<void> {
  const ports = (s: string) => rename(s).replace(/\b(9080|1984)\b/g, String(gw.proxyPort));
  const admin = (c: Call) => gw.admin(c.method, ports(c.path), c.body === undefined ? undefined : ports(c.body));
  const text = git('show', `HEAD:t/plugin/${f}`);
  // a file's add_block_preprocessor may give blocks without a request one
  const preamble = text.slice(0, text.indexOf('__DATA__'));
  // a preprocessor's default http_config with servers: blocks proxy to those, which only APISIX's test nginx runs
  const ownServers = /->http_config\s*\/\/[\s\S]*?\blisten\s+\d+/.test(preamble);
  const defaultRequest = /if \(!\$block->request\) \{\s*\$block->set_value\("request", "([^"]+)"\)/.exec(preamble)?.[1];
  for (const b of splitBlocks(text)) {
    const config = b.sections.get('config');
    const p = plan(b, gw.proxyPort, defaultRequest);
    const firstPath = typeof p === 'string' ? undefined : p.reqs[0].path.split('?')[0];
    // a location of the block's config, or of the config a preprocessor gives every block
    const toConfig = firstPath !== undefined && [...locations(config), ...locations(preamble)].some((l) => firstPath === l || (l.endsWith('/') && firstPath.startsWith(l)));
    let wrote = false;
    const say = (kind: Kind, why: string) => { out[kind]++; if (process.env.VERBOSE && kind !== 'match' && kind !== 'setup') console.log(`  ${kind.toUpperCase()} ${f} ${b.name}: ${why}`); };
    if (config !== undefined) {
      const stmts = toConfig && typeof p !== 'string' && p.reqs.length === 1 && locations(config).length === 1 ? configStatements(config) : undefined;
      const ev = typeof p === 'string' ? undefined : p.expects[0];
      if (stmts) {
        try {
          const r = await run(stmts, async (c) => { if (c.method !== 'GET') wrote = true; return admin(c); });
          if (wrote) await synced(gw);
          const got = r.out;
          const same = ev && (ev.code === r.status || (ev.code === 200 && r.status < 300)) && (ev.body === undefined || rename(ev.body) === got) && (!ev.like || ev.like.test(got));
          // a setup the gateway answers differently is a difference (what follows may then differ too)
          if (same) say('setup', ''); else say('differ', `setup answered ${r.status} ${JSON.stringify(got.slice(0, 300))}, want ${ev?.code} ${JSON.stringify(ev?.body ?? String(ev?.like))}`);
          continue;
        } catch (e) { if (!(e instanceof Unsupported)) throw e; }
      }
      for (const c of literalCalls(config)) { await admin(c); if (c.method !== 'GET') wrote = true; }
      if (wrote) await synced(gw);
      if (toConfig || typeof p === 'string') { say('not evaluable', typeof p === 'string' ? p : 'its Lua'); continue; }
    }
    if (typeof p === 'string') { say('not evaluable', p); continue; }
    if (toConfig) { say('not evaluable', `${firstPath}: a location of the test's own nginx`); continue; }
    if (ownServers) { say('not evaluable', 'the preprocessor\'s http_config: upstream servers of the test\'s own'); continue; }
    const diffs: string[] = [];
    for (let i = 0; i < p.reqs.length; i++) {
      const d = compare(await send(gw.proxyPort, p.reqs[i]), p.expects[i]);
      if (d) diffs.push(p.reqs.length > 1 ? `#${i + 1} ${d}` : d);
    }
    if (diffs.length) say('differ', `${p.reqs.map((r) => `${r.method} ${r.path}`).join(', ')}: ${diffs.join(' | ')}`); else say('match', '');
  }
}

async function main(): Promise<void> {
  const files = process.argv.slice(2);
  if (!files.length) throw new Error('usage: node scripts/apisix-plugin-triage.ts NAME.t ...');
  const origin = await startApisixOrigin(process.env.APISIX_HOME ?? '/tmp/apisix');
  const total: Record<Kind, number> = { setup: 0, match: 0, differ: 0, 'not evaluable': 0 };
  try {
    for (const f of files) {
      // APISIX's test nginx has its TLS port on 9443, which redirect's http_to_https names; the
      // triage cannot hold 9443 on a shared machine, so it tells redirect that port instead
      const gw = await startGateway({ yaml: `${defaultYaml()}plugin_attr:\n  redirect:\n    https_port: 9443\n` });
      const one: Record<Kind, number> = { setup: 0, match: 0, differ: 0, 'not evaluable': 0 };
      try { await triage(f, gw, one); } finally { await gw.stop(); }
      for (const k of Object.keys(one) as Kind[]) total[k] += one[k];
      console.log(`${f}: ${one.setup} setup, ${one.match} match, ${one.differ} differ, ${one['not evaluable']} not evaluable`);
    }
  } finally { await origin.stop(); }
  console.log(`total: ${total.setup} setup, ${total.match} match, ${total.differ} differ, ${total['not evaluable']} not evaluable`);
}

await main();
