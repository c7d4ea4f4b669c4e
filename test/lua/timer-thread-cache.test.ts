// OpenResty's Lua thread cache as its debug lines tell it (t/106-timer.t TEST 1, t/002-content.t
// TEST 1): a content hook's coroutine and a timer's (made at ngx.timer.at) come from the cache
// when it has one (`lua reusing cached lua thread`) and go back when they end (`lua caching unused
// lua thread`). Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23 (a debug build).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { ask, logged, luaPair } from './hooks-kit.ts';
import type { RunningServer } from '../kit/server.ts';

const pair = await luaPair({ after }, `
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /timer {
            content_by_lua_block {
                local n = ngx.var.arg_n
                ngx.timer.at(0.01, function() ngx.log(ngx.WARN, "timer ", n, " ran") end)
                ngx.say("ok")
            }
        }
        location /plain { content_by_lua_block { ngx.log(ngx.WARN, "plain ran") } }
    }
`);

const CACHE = /lua (caching unused|reusing cached) lua thread|timer \d ran|plain ran/;

/** The cache's lines and the markers between them, without OpenResty's pointer and ref. */
async function cacheLines(srv: RunningServer): Promise<string[]> {
  return (await logged(srv, CACHE)).map((l) => l.replace(/(lua thread|ran).*$/, '$1'));
}

test('a content hook and a timer take and give back cached coroutines as OpenResty counts them', async () => {
  for (const srv of [pair.gh, pair.ng]) {
    if (!srv) continue;
    // one step at a time: each timer has ended (its lines written) before the next request
    for (const n of [1, 2]) {
      assert.equal((await ask(srv, `/timer?n=${n}`)).body, 'ok\n');
      await logged(srv, new RegExp(`timer ${n} ran`));
    }
    await ask(srv, '/plain');
    await logged(srv, /plain ran/);
  }
  const gh = await cacheLines(pair.gh);
  assert.deepEqual(gh, [
    '[debug] lua caching unused lua thread',
    '[warn] [lua] content_by_lua(nginx.conf:10):3: timer 1 ran',
    '[debug] lua caching unused lua thread',
    '[debug] lua reusing cached lua thread',
    '[debug] lua reusing cached lua thread',
    '[debug] lua caching unused lua thread',
    '[warn] [lua] content_by_lua(nginx.conf:10):3: timer 2 ran',
    '[debug] lua caching unused lua thread',
    '[debug] lua reusing cached lua thread',
    '[warn] [lua] content_by_lua(nginx.conf:16):1: plain ran',
    '[debug] lua caching unused lua thread',
  ]);
  if (pair.ng) assert.deepEqual(gh, await cacheLines(pair.ng));
});
