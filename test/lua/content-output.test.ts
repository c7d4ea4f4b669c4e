// content_by_lua's output and chunks, as a client and error.log see them: ngx.location.capture
// nesting and its variables, ngx.say/ngx.flush on responses without a body, a Lua file starting
// with `#!`, and the names of inline chunks from included files.
// Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23 on the same configuration.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { luaPair, same, sameLog } from './hooks-kit.ts';

const LONG = 'inc/a-long-file-name-to-make-the-chunk-name-too-long.conf';

const pair = await luaPair({ after }, String.raw`
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /depth {
            content_by_lua_block {
                local n = tonumber(ngx.var.arg_n) or 0
                ngx.print("n=", n, ";")
                if n > 0 then
                    local res = ngx.location.capture("/depth?n=" .. (n - 1))
                    ngx.print(res.status, ":", res.body)
                end
            }
        }
        location /show { content_by_lua_block { ngx.print("[", ngx.var.v, "]") } }
        location /vars {
            set $v parent;
            content_by_lua_block {
                ngx.print(ngx.location.capture("/show").body,
                          ngx.location.capture("/show", { copy_all_vars = true }).body,
                          ngx.location.capture("/show", { share_all_vars = true }).body)
            }
        }
        location /head-flush {
            content_by_lua_block {
                ngx.say("first")
                ngx.log(ngx.WARN, "flush: ", select(2, ngx.flush()))
                ngx.log(ngx.WARN, "say: ", select(2, ngx.say("second")))
            }
        }
        location /no-content {
            content_by_lua_block {
                ngx.status = 204
                ngx.send_headers()
                ngx.log(ngx.WARN, "say after 204: ", select(2, ngx.say("x")))
            }
        }
        location /print { content_by_lua_block { ngx.print("twelve bytes") } }
        location /shebang { content_by_lua_file shebang.lua; }
        include inc/lua.conf;
        include ${LONG};
    }
`, {
  'shebang.lua': '#!/usr/bin/env luajit\n\nngx.say("on line ", debug.getinfo(1).currentline)\n',
  'inc/lua.conf': 'location /included { content_by_lua_block { +++ } }\n',
  [LONG]: '\nlocation /long { content_by_lua_block { +++ } }\n',
});

test('captures nest: each level runs its own capture', async () => {
  const r = await same(pair, '/depth?n=3');
  assert.equal(r.body, 'n=3;200:n=2;200:n=1;200:n=0;');
});

test("a capture starts without the parent's variables unless copy_all_vars or share_all_vars", async () => {
  assert.equal((await same(pair, '/vars')).body, '[][parent][parent]');
});

test('HEAD: after the head, ngx.flush and ngx.say answer "header only"', async () => {
  const r = await same(pair, 'HEAD /head-flush HTTP/1.1');
  assert.equal(r.status, 200);
  await sameLog(pair, /flush: header only/);
  await sameLog(pair, /say: header only/);
});

test('a 204 whose head went out: ngx.say answers "header only"', async () => {
  assert.equal((await same(pair, '/no-content')).status, 204);
  await sameLog(pair, /say after 204: header only/);
});

test('HEAD over HTTP/1.0: the held response gets no Content-Length', async () => {
  const r = await same(pair, 'HEAD /print HTTP/1.0');
  assert.ok(!r.headers.some(([n]) => n === 'Content-Length'));
  // a GET over HTTP/1.0 is held whole and gets one
  const g = await same(pair, 'GET /print HTTP/1.0');
  assert.deepEqual(g.headers.filter(([n]) => n === 'Content-Length'), [['Content-Length', '12']]);
});

test('a Lua file whose first line starts with # loads, its line numbers kept', async () => {
  assert.equal((await same(pair, '/shebang')).body, 'on line 3\n');
});

test("an included file's chunk is named by its path under the conf's directory, a long one by its end", async () => {
  assert.equal((await same(pair, '/included')).status, 500);
  await sameLog(pair, /content_by_lua\(inc\/lua\.conf:1\):1: unexpected symbol/);
  assert.equal((await same(pair, '/long')).status, 500);
  const [line] = await sameLog(pair, /content_by_lua\(\.\.\..*:2\)/);
  assert.match(line, /content_by_lua\(\.\.\.e-to-make-the-chunk-name-too-long\.conf:2\)/);
});
