// ngx.exit, ngx.exec, ngx.redirect and a jumping ngx.req.set_uri inside a light thread end the
// whole request's Lua: the entry coroutine and the other light threads stop where they wait, and
// the response is the one that call makes. While subrequests are waited for they are refused.
// Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23 on the same config. The waits
// that get cut are long (5 s): a server that did not cut them would answer late and differently.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { luaPair, same, sameLog } from './hooks-kit.ts';

const pair = await luaPair({ after }, `
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /now {
            content_by_lua_block {
                ngx.say("first")
                ngx.thread.spawn(function()
                    ngx.say("in thread")
                    ngx.exit(ngx.OK)
                end)
                ngx.say("never said")
            }
        }
        location /later {
            content_by_lua_block {
                ngx.say("first")
                ngx.thread.spawn(function()
                    ngx.sleep(0.01)
                    ngx.say("thread exits")
                    ngx.exit(0)
                end)
                ngx.say("spawned")
                ngx.sleep(5)
                ngx.say("entry woke up")
            }
        }
        location /sibling {
            content_by_lua_block {
                ngx.thread.spawn(function() ngx.sleep(5) ngx.say("slow thread") end)
                ngx.thread.spawn(function() ngx.sleep(0.01) ngx.say("quick thread") ngx.exit(0) end)
                ngx.say("entry returns")
            }
        }
        location /fail-with-thread {
            content_by_lua_block {
                ngx.thread.spawn(function() ngx.sleep(5) ngx.say("thread after the error") end)
                error("entry fails")
            }
        }
        location /thread-fails {
            content_by_lua_block {
                ngx.thread.spawn(function() ngx.no_such_function() end)
                ngx.say("entry goes on")
            }
        }
        location /wait-nothing {
            content_by_lua_block { ngx.thread.wait() ngx.say("never said") }
        }
        location /wait-coroutine {
            content_by_lua_block {
                local co = coroutine.create(function() coroutine.yield() end)
                coroutine.resume(co)
                ngx.thread.wait(co)
            }
        }
        location /many {
            content_by_lua_block {
                local waited = 0
                for i = 1, 150 do
                    local t = ngx.thread.spawn(function() return i end)
                    if i % 2 == 0 then waited = waited + select(2, ngx.thread.wait(t)) end
                end
                ngx.say("waited for ", waited)
            }
        }
        location /fail {
            content_by_lua_block { local t = nil; return t.field }
        }
        location /waiting {
            content_by_lua_block {
                local slow = ngx.thread.spawn(function() ngx.sleep(5) return "slow" end)
                ngx.thread.spawn(function() ngx.sleep(0.01) ngx.exit(ngx.HTTP_FORBIDDEN) end)
                ngx.say(ngx.thread.wait(slow))
            }
        }
        location /entry-exits {
            content_by_lua_block {
                ngx.thread.spawn(function() ngx.sleep(5) ngx.say("thread after exit") end)
                ngx.say("entry")
                ngx.exit(200)
            }
        }
        location /pcall {
            content_by_lua_block {
                ngx.thread.spawn(function()
                    ngx.sleep(0.01)
                    pcall(ngx.exit, 201)
                    ngx.say("after pcall")
                end)
                ngx.sleep(5)
            }
        }
        location /exec {
            content_by_lua_block {
                ngx.thread.spawn(function() ngx.sleep(0.01) ngx.exec("/target", "from=thread") end)
                ngx.sleep(5)
                ngx.say("entry woke up")
            }
        }
        location /exec-now {
            content_by_lua_block {
                ngx.thread.spawn(function() ngx.exec("/target") end)
                ngx.say("never said")
            }
        }
        location /target {
            content_by_lua_block { ngx.say("target ", ngx.var.args) }
        }
        location /redirect {
            content_by_lua_block {
                ngx.thread.spawn(function() ngx.sleep(0.01) ngx.redirect("/elsewhere", 301) end)
                ngx.sleep(5)
            }
        }
        location /rewrite-ok {
            rewrite_by_lua_block {
                ngx.thread.spawn(function() ngx.sleep(0.01) ngx.exit(ngx.OK) end)
                ngx.sleep(5)
                ngx.exit(500)
            }
            content_by_lua_block { ngx.say("content ran") }
        }
        location /rewrite-jump {
            rewrite_by_lua_block {
                ngx.thread.spawn(function() ngx.sleep(0.01) ngx.req.set_uri("/target", true) end)
                ngx.sleep(5)
                ngx.say("entry woke up")
            }
        }
        location /access-status {
            access_by_lua_block {
                ngx.thread.spawn(function() ngx.sleep(0.01) ngx.exit(ngx.HTTP_UNAUTHORIZED) end)
                ngx.sleep(5)
            }
            content_by_lua_block { ngx.say("content ran") }
        }
        location /close {
            content_by_lua_block {
                ngx.say("held output")
                ngx.thread.spawn(function() ngx.sleep(0.01) ngx.exit(444) end)
                ngx.sleep(5)
            }
        }
        location /subrequest {
            content_by_lua_block {
                ngx.thread.spawn(function() ngx.sleep(0.01) ngx.exit(0) end)
                local res = ngx.location.capture("/slow")
                ngx.say("entry got ", res.body)
            }
        }
        location /slow {
            content_by_lua_block { ngx.sleep(0.3) ngx.print("slow body") }
        }
    }
`);

test('a thread that exits before it waits ends the request: the spawning code does not go on', async () => {
  assert.equal((await same(pair, '/now')).body, 'first\nin thread\n');
});

test('a thread that exits later kills the entry coroutine where it sleeps', async () => {
  const r = await same(pair, '/later');
  assert.equal(r.body, 'first\nspawned\nthread exits\n');
  assert.equal(r.complete, true);
});

test('the entry already returned: the other light threads are killed', async () => {
  assert.equal((await same(pair, '/sibling')).body, 'entry returns\nquick thread\n');
});

test('a failed entry kills its threads; the coroutines after a killed one fail as any other', async () => {
  await same(pair, '/sibling');
  const failed = await same(pair, '/fail-with-thread');
  assert.equal(failed.status, 500);
  assert.doesNotMatch(failed.body, /thread after the error/);
  assert.equal((await same(pair, '/fail')).status, 500);
  await sameLog(pair, /attempt to index/);
  const lines = await sameLog(pair, /entry thread aborted/);
  assert.match(lines[0]!, /runtime error: content_by_lua\(nginx\.conf:\d+\):3: entry fails$/);
  assert.match(lines[1]!, /runtime error: content_by_lua\(nginx\.conf:\d+\):1: attempt to index local 't' \(a nil value\)$/);
});

test('an error status from a thread is the response, also while the entry waits on another thread', async () => {
  assert.equal((await same(pair, '/waiting')).status, 403);
});

test('ngx.exit in the entry coroutine kills its light threads', async () => {
  assert.equal((await same(pair, '/entry-exits')).body, 'entry\n');
});

test('pcall does not keep a thread that exits alive', async () => {
  const r = await same(pair, '/pcall');
  assert.equal(r.status, 201);
  assert.equal(r.body, '');
});

test('ngx.exec in a thread redirects the request internally, at once or after a wait', async () => {
  assert.equal((await same(pair, '/exec')).body, 'target from=thread\n');
  assert.equal((await same(pair, '/exec-now')).body, 'target nil\n');
});

test('ngx.redirect in a thread is the response', async () => {
  const r = await same(pair, '/redirect');
  assert.equal(r.status, 301);
  assert.deepEqual(r.headers.find(([n]) => n.toLowerCase() === 'location'), ['Location', '/elsewhere']);
});

test('ngx.exit(ngx.OK) in a thread of rewrite_by_lua goes on to the next phase', async () => {
  assert.equal((await same(pair, '/rewrite-ok')).body, 'content ran\n');
});

test('ngx.req.set_uri(uri, true) in a thread of rewrite_by_lua selects the location again', async () => {
  assert.equal((await same(pair, '/rewrite-jump')).body, 'target nil\n');
});

test('an error status from a thread of access_by_lua is the response', async () => {
  assert.equal((await same(pair, '/access-status')).status, 401);
});

test('ngx.exit(444) in a thread closes the connection; the held output never goes out', async () => {
  const r = await same(pair, '/close');
  assert.equal(r.status, 0);
});

test('while a subrequest is waited for, ngx.exit in a thread is refused and the thread fails', async () => {
  assert.equal((await same(pair, '/subrequest')).body, 'entry got slow body\n');
  const lines = await sameLog(pair, /attempt to abort/);
  assert.match(lines[0]!, /^\[error\] lua user thread aborted: runtime error: content_by_lua\(nginx\.conf:\d+\):2: attempt to abort with pending subrequests/);
});

test('a thread that fails is logged in LuaJIT\'s words; the entry goes on', async () => {
  assert.equal((await same(pair, '/thread-fails')).body, 'entry goes on\n');
  const lines = await sameLog(pair, /no_such_function/);
  assert.match(lines[0]!, /^\[error\] lua user thread aborted: runtime error: content_by_lua\(nginx\.conf:\d+\):2: attempt to call field 'no_such_function' \(a nil value\)$/);
});

test('ngx.thread.wait with no thread, or with a coroutine that is not a light thread, fails the hook', async () => {
  assert.equal((await same(pair, '/wait-nothing')).status, 500);
  assert.equal((await same(pair, '/wait-coroutine')).status, 500);
  assert.match((await sameLog(pair, /at least one coroutine/))[0]!, /runtime error: content_by_lua\(nginx\.conf:\d+\):1: at least one coroutine should be specified$/);
  assert.match((await sameLog(pair, /not a user thread/))[0]!, /runtime error: content_by_lua\(nginx\.conf:\d+\):4: attempt to wait on a coroutine that is not a user thread$/);
});

test('a hook that spawns many threads, some never waited for, ends cleanly and the next one too', async () => {
  assert.equal((await same(pair, '/many')).body, 'waited for 5700\n');
  assert.equal((await same(pair, '/many')).body, 'waited for 5700\n');
  assert.equal((await same(pair, '/now')).body, 'first\nin thread\n');
});
