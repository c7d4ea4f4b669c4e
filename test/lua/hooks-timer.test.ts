// ngx.timer.at/every: callbacks run later in coroutines of their own, with their arguments, and
// log with `context: ngx.timer`. Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { luaPair, same, sameLog } from './hooks-kit.ts';

const pair = await luaPair({ after }, `
    lua_shared_dict state 64k;
    init_worker_by_lua_block {
        ngx.timer.at(0, function(premature, what)
            ngx.shared.state:set("from_init_worker", what)
        end, "init timer ran")
    }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /start {
            content_by_lua_block {
                local ok, err = ngx.timer.at(0.01, function(premature, a, b)
                    ngx.sleep(0.01)
                    ngx.log(ngx.WARN, "timer got ", a, " ", b, " ", tostring(premature))
                    local ok, err = pcall(ngx.say, "x")
                    ngx.shared.state:set("said", err)
                    ngx.shared.state:set("done", true)
                end, "one", 2)
                ngx.say(tostring(ok), " ", tostring(err), " ", ngx.timer.pending_count())
                ngx.say(select(2, pcall(ngx.timer.at, -1, function() end)))
                ngx.say(select(2, pcall(ngx.timer.at, 1, "not a function")))
            }
        }
        location /state {
            content_by_lua_block {
                local d = ngx.shared.state
                ngx.say(d:get("from_init_worker"), " ", tostring(d:get("done")), " ", tostring(d:get("said")))
            }
        }
        location /every {
            content_by_lua_block {
                ngx.shared.state:set("ticks", 0)
                ngx.timer.every(0.01, function() ngx.shared.state:incr("ticks", 1) end)
                ngx.say("started")
            }
        }
        location /ticks { content_by_lua_block { ngx.say(ngx.shared.state:get("ticks") >= 2) } }
    }
`);

test('ngx.timer.at runs its function later with its arguments; the timer has no request', async () => {
  const r = await same(pair, '/start');
  assert.equal(r.body, "1 nil 1\n1\nbad argument #2 to '?' (Lua function expected)\n");
  const lines = await sameLog(pair, /timer got/);
  assert.deepEqual(lines, ['[warn] [lua] content_by_lua(nginx.conf:16):4: timer got one 2 false, context: ngx.timer, client: 127.0.0.1, server: 127.0.0.1:PORT']);
  assert.equal((await same(pair, '/state')).body, 'init timer ran true API disabled in the context of ngx.timer\n');
});

test('ngx.timer.every repeats', async () => {
  await same(pair, '/every');
  const deadline = Date.now() + 10_000;
  let body = '';
  while (Date.now() < deadline && body !== 'true\n') {
    body = (await same(pair, '/ticks').catch(() => ({ body: '' }))).body;
    if (body !== 'true\n') await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(body, 'true\n');
});
