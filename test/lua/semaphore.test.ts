// require "ngx.semaphore" (lua-resty-core's module, built in here): counts, waits that yield,
// first-come first-woken, timeouts, waiters that go away, and its refusals. Reference: Debian's
// nginx 1.22 + libnginx-mod-http-lua 0.10.23 with its lua-resty-core on the same configuration.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { ask, luaPair, same, sameLog } from './hooks-kit.ts';

const pair = await luaPair({ after }, `
    lua_package_path "$prefix?.lua;;";
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /counts {
            content_by_lua_block {
                local semaphore = require "ngx.semaphore"
                local sem = semaphore.new(2)
                ngx.say("count ", sem:count(), " ", type(semaphore.version))
                for _ = 1, 3 do
                    local ok, err = sem:wait(0)
                    ngx.say(tostring(ok), " ", tostring(err))
                end
                ngx.say("post ", tostring(sem:post(3)), " count ", sem:count())
                ngx.say("empty ", sem.new():count(), " ", semaphore.new("4"):count())
            }
        }
        location /order {
            content_by_lua_block {
                local sem = require("ngx.semaphore").new()
                local threads = {}
                for i = 1, 3 do
                    threads[i] = ngx.thread.spawn(function()
                        local ok, err = sem:wait(5)
                        ngx.say("woken ", i, " ", tostring(ok), " ", tostring(err), " count ", sem:count())
                    end)
                end
                ngx.say("waiting, count ", sem:count())
                sem:post(2)
                -- nobody wakes inside post: the waiters run once this thread waits
                ngx.say("posted, count ", sem:count())
                ngx.thread.wait(threads[1], threads[2])
                ngx.thread.wait(threads[1], threads[2])
                ngx.say("two woken, count ", sem:count())
                sem:post()
                ngx.thread.wait(threads[3])
                ngx.say("done, count ", sem:count())
            }
        }
        location /queue-first {
            content_by_lua_block {
                local sem = require("ngx.semaphore").new()
                local t = ngx.thread.spawn(function() return sem:wait(5) end)
                sem:post()
                -- a resource posted while someone waits is theirs: this wait queues behind
                ngx.say("late ", tostring(sem:wait(0)), " ", tostring(select(2, sem:wait(0))))
                ngx.say("first ", tostring(select(2, ngx.thread.wait(t))))
            }
        }
        location /timeout {
            content_by_lua_block {
                local sem = require("ngx.semaphore").new()
                local ok, err = sem:wait(0.01)
                ngx.say(tostring(ok), " ", err, " count ", sem:count())
            }
        }
        location /killed {
            content_by_lua_block {
                local sem = require("ngx.semaphore").new()
                local t = ngx.thread.spawn(function() return sem:wait(5) end)
                ngx.say("waiting, count ", sem:count())
                ngx.thread.kill(t)
                ngx.say("killed, count ", sem:count())
                sem:post()
                ngx.say("posted, count ", sem:count(), " ", tostring(sem:wait(0)))
            }
        }
        location /timer {
            content_by_lua_block {
                local semaphore = require "ngx.semaphore"
                local sem, ready, done = semaphore.new(), semaphore.new(), semaphore.new()
                assert(ngx.timer.at(0, function()
                    ready:post()
                    local ok, err = sem:wait(5)
                    ngx.log(ngx.NOTICE, "timer woken ", tostring(ok), " ", tostring(err))
                    done:post()
                end))
                -- the timer's post wakes this request once the timer waits in turn
                assert(ready:wait(5))
                sem:post()
                ngx.say("done ", tostring(done:wait(5)))
            }
        }
        location /wait-shared {
            content_by_lua_block {
                local shared = require "shared_sem"
                ngx.log(ngx.NOTICE, "shared wait starts")
                local ok, err = shared.sem:wait(10)
                ngx.say("shared ", tostring(ok), " ", tostring(err))
            }
        }
        location /post-shared {
            content_by_lua_block {
                local shared = require "shared_sem"
                ngx.say("count before ", shared.sem:count())
                shared.sem:post()
            }
        }
        location /exit-waiting {
            content_by_lua_block {
                local shared = require "shared_sem"
                ngx.thread.spawn(function() shared.sem:wait(10) end)
                ngx.say("waiting, count ", shared.sem:count())
                ngx.exit(200)
            }
        }
        location /count-shared {
            content_by_lua_block { ngx.say("count ", require("shared_sem").sem:count()) }
        }
        location /refused {
            content_by_lua_block {
                local semaphore = require "ngx.semaphore"
                local sem = semaphore.new()
                for _, f in ipairs({
                    function() return semaphore.new(-1) end,
                    function() return sem.wait({}, 1) end,
                    function() return sem.post(nil) end,
                    function() return sem:post(0) end,
                    function() return sem:wait(-1) end,
                    function() return sem.count(1) end,
                }) do
                    local ok, err = pcall(f)
                    ngx.say(tostring(ok), " ", (tostring(err):gsub("^.*:%d+: ", "")))
                end
            }
            header_filter_by_lua_block {
                local ok, err = require("ngx.semaphore").new(1):wait(1)
                ngx.log(ngx.NOTICE, "in header filter ", tostring(ok), " ", err)
            }
        }
    }
`, { 'shared_sem.lua': 'return { sem = require("ngx.semaphore").new() }\n' });

test('new, count, wait(0) and post: resources taken at once while there are some', async () => {
  assert.equal((await same(pair, '/counts')).body,
    'count 2 string\ntrue nil\ntrue nil\nnil timeout\npost true count 3\nempty 0 4\n');
});

test('waiters wake in the order they came, after the poster yields; count is resources less waiters', async () => {
  assert.equal((await same(pair, '/order')).body, [
    'waiting, count -3', 'posted, count -1',
    'woken 1 true nil count -1', 'woken 2 true nil count -1', 'two woken, count -1',
    'woken 3 true nil count 0', 'done, count 0', ''].join('\n'));
});

test('a resource posted while someone waits goes to them, not to a later wait', async () => {
  assert.equal((await same(pair, '/queue-first')).body, 'late nil timeout\nfirst true\n');
});

test('a wait that times out gives false, "timeout" and leaves the queue', async () => {
  assert.equal((await same(pair, '/timeout')).body, 'false timeout count 0\n');
});

test('a killed waiter leaves the queue', async () => {
  assert.equal((await same(pair, '/killed')).body, 'waiting, count -1\nkilled, count 0\nposted, count 1 true\n');
});

test('a timer and a request wait on each other\'s semaphores', async () => {
  assert.equal((await same(pair, '/timer')).body, 'done true\n');
  const lines = await sameLog(pair, /timer woken/);
  assert.match(lines[0], /^\[notice\] \[lua\] content_by_lua\(nginx\.conf:\d+\):\d+: timer woken true nil, context: ngx\.timer/);
});

for (const name of ['gh', 'ng'] as const) {
  test(`one request's post wakes another request's wait (${name === 'gh' ? 'Gatehouse' : 'the reference'})`, async (t) => {
    const srv = pair[name];
    if (!srv) return t.skip('no reference');
    const waiting = ask(srv, '/wait-shared');
    await srv.waitForLog('error.log', /shared wait starts/, 10_000);
    assert.equal((await ask(srv, '/post-shared')).body, 'count before -1\n');
    assert.equal((await waiting).body, 'shared true nil\n');
  });
}

test('a waiter whose request ends (ngx.exit) leaves the queue', async () => {
  assert.equal((await same(pair, '/exit-waiting')).body, 'waiting, count -1\n');
  assert.equal((await same(pair, '/count-shared')).body, 'count 0\n');
});

test('refusals: bad arguments raise lua-resty-core\'s errors; a phase that cannot wait answers nil and why', async () => {
  assert.equal((await same(pair, '/refused')).body, [
    'false no negative number', 'false not a semaphore instance', 'false not a semaphore instance',
    'false positive number required', 'false no negative number', 'false not a semaphore instance', ''].join('\n'));
  const lines = await sameLog(pair, /in header filter/);
  assert.match(lines[0], /in header filter nil API disabled in the context of header_filter_by_lua\*/);
});
