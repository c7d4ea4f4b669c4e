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
import { defaultYaml, startGateway, type Reply } from '../test/gateway/harness.ts';
import { configStatements, freePort, git, literalCalls, perlRegex, rename, run, splitBlocks, Unsupported } from './apisix-t-blocks.ts';
import type { Call, Stmt } from './apisix-t-blocks.ts';

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

function blocks(text: string): Block[] {
  return splitBlocks(text).map(({ name, text: part, sections }) => {
    const code = Number(/^error_code: ?(\d+)/m.exec(part.split(/^--- /m).find((x) => x.startsWith('error_code')) ?? '')?.[1] ?? 200);
    const config = sections.get('config');
    const b: Block = { name, effects: config ? literalCalls(config) : [], code };
    const plain = !sections.has('yaml_config') && !sections.has('extra_yaml_config') && !sections.has('main_config');
    if (plain) b.stmts = configStatements(config);
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
