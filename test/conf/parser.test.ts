// Unit tests of the configuration reader below the CLI: raw Lua blocks,
// where errors land (the syntax error kept for after the directives read
// before it, block errors at the closing brace), value parsers and glob.
// The main evidence for exactness is reference-syntax.test.ts and reference-main.test.ts (against nginx).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseConfig } from '../../src/conf/parser.ts';
import type { ConfNode } from '../../src/conf/parser.ts';
import { ConfContext, Level } from '../../src/conf/context.ts';
import { Ctx } from '../../src/conf/directive.ts';
import type { Directive } from '../../src/conf/directive.ts';
import { applyBlock, Registry } from '../../src/conf/registry.ts';
import { ConfError } from '../../src/conf/errors.ts';
import { parseOffset, parseSize, parseTime } from '../../src/conf/values.ts';
import { globSync } from '../../src/conf/glob.ts';

function parse(text: string, files: Record<string, string> = {}) {
  const all: Record<string, string> = { '/c/nginx.conf': text, ...files };
  return parseConfig('/c/nginx.conf', undefined, {
    confPrefix: '/c/',
    readFile: (f) => {
      if (!(f in all)) throw Object.assign(new Error('ENOENT'), { code: 'ENOENT', errno: -2 });
      return all[f];
    },
  });
}

test('Lua block bodies are read raw: braces in strings, comments and long brackets do not count', () => {
  const body = `
    local t = { a = "}", b = '{' }   -- a } in a comment
    --[==[ } ]] still comment ]==]
    local s = [[ {{{ ]] .. "x\\"}"
    if t then ngx.say("}") end
  `;
  const r = parse(`http {\n  content_by_lua_block {${body}}\n  root /x;\n}\n`);
  assert.equal(r.error, undefined);
  const http = r.nodes[0];
  const lua = http.children![0];
  assert.equal(lua.luaBlock, true);
  assert.equal(lua.args[0], body);
  assert.equal(lua.line, 2);
  assert.equal(lua.endLine, 7);
  assert.deepEqual(http.children![1], { name: 'root', args: ['/x'], quoted: [false], file: '/c/nginx.conf', line: 8 });
});

test('a Lua string that does not close on its line is an ordinary quote', () => {
  const r = parse('init_by_lua_block {\n  x = "a\n  y = 1 }\nfoo;\n');
  assert.equal(r.error, undefined);
  assert.equal(r.nodes[0].args[0], '\n  x = "a\n  y = 1 ');
  assert.equal(r.nodes[1].line, 4);
});

test('Lua block errors use lua-nginx-module\'s words and lines', () => {
  const eof = parse('init_by_lua_block {\n  local t = {\n  x = 1\n');
  assert.equal(eof.error?.text, 'unexpected end of file, expecting terminating characters for lua code block in /c/nginx.conf:2');
  const bracket = parse('init_by_lua_block {\n  local s = [==[ abc ]=]\n}\n');
  assert.equal(bracket.error?.text, 'Lua code block missing the closing long bracket "]==]", the inlined Lua code may be too long in /c/nginx.conf:2');
});

test('a directive is placed at the line of its ; or {', () => {
  const r = parse('events\n{\n}\nworker_processes\n  2\n  ;\n');
  assert.equal(r.nodes[0].line, 2);
  assert.equal(r.nodes[0].endLine, 3);
  assert.equal(r.nodes[1].line, 6);
});

function registry(handlers: Record<string, Partial<Directive>>): Registry {
  const directives = Object.entries(handlers).map(([name, d]) => ({ name, contexts: Ctx.MAIN | Ctx.HTTP, args: [0, 9], handler: () => undefined, ...d } as Directive));
  return new Registry([{ name: 'test', directives }]);
}

function apply(reg: Registry, nodes: ConfNode[]): ConfError | undefined {
  const cf = new ConfContext(reg, { prefix: '/p/', confPrefix: '/c/', confFile: '/c/nginx.conf' }, Ctx.MAIN, new Level(), {}, {});
  try {
    applyBlock(cf, nodes);
  } catch (e) {
    if (e instanceof ConfError) return e;
    throw e;
  }
  return undefined;
}

test('a syntax error waits for the directives read before it, and stops the block before its end checks', () => {
  const seen: string[] = [];
  const reg = registry({
    a: { handler: (_cf, n) => { seen.push(n.args[0]); } },
    block: {
      block: true,
      handler(cf, n) {
        cf.block(n.children ?? [], Ctx.HTTP, cf.level, 'http');
        throw cf.error('end-of-block check');
      },
    },
  });
  const r = parse('a 1;\nblock {\n  a 2;\n  a "3"x;\n  a 4;\n}\n');
  assert.equal(r.error?.text, 'unexpected "x" in /c/nginx.conf:4');
  assert.equal(apply(reg, r.nodes)?.text, 'unexpected "x" in /c/nginx.conf:4');
  assert.deepEqual(seen, ['1', '2']);
  // without the syntax error the block's own check runs, at its closing brace
  assert.equal(apply(reg, parse('block {\n  a 2;\n\n}\n').nodes)?.text, 'end-of-block check in /c/nginx.conf:4');
});

test('a semantic error in an included file comes before the includer\'s later syntax error', () => {
  const r = parse('include a.conf;\n}\n', { '/c/a.conf': 'a 1;\nunknown;\n' });
  const e = apply(registry({ a: {} }), r.nodes);
  assert.equal(e?.text, 'unknown directive "unknown" in /c/a.conf:2');
});

test('time values follow ngx_parse_time', () => {
  assert.equal(parseTime('10'), 10_000);
  assert.equal(parseTime('1h 30m'), 5_400_000);
  assert.equal(parseTime('1h30'), 3_630_000);
  assert.equal(parseTime('500ms'), 500);
  assert.equal(parseTime('1d2h3m4s5ms'), 93_784_005);
  assert.equal(parseTime('2w'), 1_209_600_000);
  assert.ok(Number.isNaN(parseTime('1y')));
  assert.ok(Number.isNaN(parseTime('1M')));
  assert.ok(Number.isNaN(parseTime('1s 1h')));
  assert.ok(Number.isNaN(parseTime('1m 1m')));
  assert.ok(Number.isNaN(parseTime('ms')));
  assert.ok(Number.isNaN(parseTime('')));
  assert.ok(Number.isNaN(parseTime('1.5s')));
  assert.equal(parseTime('1y 2M', true), 31_536_000 + 5_184_000);
  assert.ok(Number.isNaN(parseTime('5ms', true)));
});

test('sizes follow ngx_parse_size and ngx_parse_offset', () => {
  assert.equal(parseSize('8k'), 8192);
  assert.equal(parseSize('1M'), 1 << 20);
  assert.equal(parseSize('0'), 0);
  assert.ok(Number.isNaN(parseSize('1g')));
  assert.ok(Number.isNaN(parseSize('k')));
  assert.ok(Number.isNaN(parseSize('-1')));
  assert.ok(Number.isNaN(parseSize('1 k')));
  assert.equal(parseOffset('2G'), 2 * 2 ** 30);
  assert.ok(Number.isNaN(parseOffset('99999999999999999999')));
});

test('glob: wildcards per component, hidden files only when asked, bytewise order', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'conf-glob-'));
  try {
    for (const f of ['b.conf', 'a.conf', 'B.conf', '.hidden.conf', 'x[1].conf', 'sub/c.conf', 'sub2/d.conf']) {
      fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
      fs.writeFileSync(path.join(dir, f), '');
    }
    assert.deepEqual(globSync(`${dir}/*.conf`), ['B.conf', 'a.conf', 'b.conf', 'x[1].conf'].map((f) => `${dir}/${f}`));
    assert.deepEqual(globSync(`${dir}/.*.conf`), [`${dir}/.hidden.conf`]);
    assert.deepEqual(globSync(`${dir}/[!ab].conf`), [`${dir}/B.conf`]);
    assert.deepEqual(globSync(`${dir}/x\\[1\\].conf`), [`${dir}/x[1].conf`]);
    assert.deepEqual(globSync(`${dir}/*/*.conf`), [`${dir}/sub/c.conf`, `${dir}/sub2/d.conf`]);
    assert.deepEqual(globSync(`${dir}/none/*.conf`), []);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
