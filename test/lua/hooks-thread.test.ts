// ngx.thread.spawn/wait/kill: light threads on the request's coroutine scheduler.
// Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23 on the same config.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { luaPair, same, sameLog } from './hooks-kit.ts';

const pair = await luaPair({ after }, `
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /spawn {
            content_by_lua_block {
                local function worker(name, delay)
                    ngx.say(name, " start")
                    ngx.sleep(delay)
                    ngx.say(name, " end")
                    return name .. " result", delay
                end
                local a = ngx.thread.spawn(worker, "a", 0.05)
                local b = ngx.thread.spawn(worker, "b", 0.01)
                ngx.say("spawned")
                local ok, res, d = ngx.thread.wait(a)
                ngx.say("waited a: ", tostring(ok), " ", res, " ", d)
                ok, res = ngx.thread.wait(b)
                ngx.say("waited b: ", tostring(ok), " ", res)
                local c = ngx.thread.spawn(function() error("thread failed") end)
                ok, res = ngx.thread.wait(c)
                ngx.say("waited c: ", tostring(ok), " ", res)
            }
        }
        location /unwaited {
            content_by_lua_block {
                ngx.thread.spawn(function() ngx.sleep(0.02) ngx.say("late thread") end)
                ngx.say("entry done")
            }
        }
    }
`);

test('spawn runs at once until the thread waits; wait gives its results, or false and the error', async () => {
  const r = await same(pair, '/spawn');
  assert.equal(r.body, 'a start\nb start\nspawned\nb end\na end\nwaited a: true a result 0.05\nwaited b: true b result\nwaited c: false thread failed\n');
  const lines = await sameLog(pair, /lua user thread aborted/);
  assert.equal(lines[0], '[error] lua user thread aborted: runtime error: content_by_lua(nginx.conf:10):15: thread failed');
});

test('the entry thread\'s end waits for its light threads', async () => {
  assert.equal((await same(pair, '/unwaited')).body, 'entry done\nlate thread\n');
});
