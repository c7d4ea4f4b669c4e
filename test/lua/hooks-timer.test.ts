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
        location /threads {
            content_by_lua_block {
                ngx.timer.at(0, function()
                    local t = ngx.thread.spawn(function() return "thread result" end)
                    ngx.log(ngx.WARN, "spawned: ", coroutine.status(t))
                    ngx.log(ngx.WARN, "waited: ", select(2, ngx.thread.wait(t)))
                    ngx.thread.spawn(function()
                        ngx.sleep(0.01)
                        -- runs once this timer is over: it is then the only timer running
                        ngx.timer.at(0, function()
                            ngx.log(ngx.WARN, "running after the exit: ", ngx.timer.running_count())
                        end)
                        ngx.exit(0)
                    end)
                    ngx.sleep(5)
                    ngx.log(ngx.WARN, "never: the thread's ngx.exit ended the timer")
                end)
                ngx.say("ok")
            }
        }
        location /ctx {
            content_by_lua_block {
                ngx.ctx.who = "request"
                local function f(premature, n)
                    ngx.log(ngx.WARN, "timer ", n, " ctx: ", tostring(ngx.ctx.who))
                    ngx.ctx.who = "timer " .. n
                    -- a timer made in a timer names the same client and server
                    if n == 1 then ngx.timer.at(0, f, 2) end
                end
                ngx.timer.at(0, f, 1)
                ngx.say("ok")
            }
        }
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

test('a timer runs light threads: wait, status, and ngx.exit in one ends the timer (t/106-timer.t 15, 19)', async () => {
  await same(pair, '/threads');
  await sameLog(pair, /running after the exit/);
  const lines = await sameLog(pair, /spawned|waited|never|after the exit/);
  assert.deepEqual(lines.map((l) => l.replace(/^.*?:\d+: /, '').replace(/, context.*/, '')),
    ['spawned: zombie', 'waited: thread result', 'running after the exit: 1']);
});

test('each timer has its own ngx.ctx; a timer made in a timer logs the same client and server', async () => {
  await same(pair, '/ctx');
  const lines = await sameLog(pair, /timer 2 ctx/);
  assert.equal(lines.length, 1);
  assert.match(lines[0], /timer 2 ctx: nil, context: ngx\.timer, client: 127\.0\.0\.1, server: 127\.0\.0\.1:PORT$/);
  assert.match((await sameLog(pair, /timer 1 ctx/))[0], /timer 1 ctx: nil, context: ngx\.timer, client: 127\.0\.0\.1/);
});
