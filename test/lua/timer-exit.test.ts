// A graceful stop waits for the Lua timers: one still running when QUIT comes finishes its
// sleeps, and one still pending runs with `premature` true and finishes too, before the worker
// exits — nginx keeps a worker while its timers' fake connections are open; at exit a new timer
// is refused unless it is for now. Reference: Debian's
// nginx 1.22 + libnginx-mod-http-lua 0.10.23.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { luaPair } from './hooks-kit.ts';
import type { RunningServer } from '../kit/server.ts';

const http = `
    init_worker_by_lua_block {
        ngx.timer.at(0, function()
            ngx.log(ngx.ERR, "running timer started")
            ngx.sleep(0.5)
            ngx.log(ngx.ERR, "running timer done")
        end)
        ngx.timer.at(3600, function(premature)
            ngx.sleep(0.2)
            ngx.log(ngx.ERR, "pending timer done, premature: ", tostring(premature))
            local ok, err = ngx.timer.at(1, function() end)
            ngx.log(ngx.ERR, "a new timer at exit: ", tostring(ok), " ", err)
            ngx.timer.at(0, function(premature)
                ngx.sleep(0.1)
                ngx.log(ngx.ERR, "a timer for now at exit done, premature: ", tostring(premature))
            end)
        end)
    }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / { return 200; }
    }
`;

/** QUIT, the master's exit, then the Lua lines of error.log (read before the prefix goes). */
async function quitAndRead(srv: RunningServer): Promise<string[]> {
  await srv.waitForLog('error.log', /running timer started/, 10_000);
  srv.signal('QUIT');
  await srv.exited;
  return srv.readFile('error.log').split('\n').filter((l) => /timer (done|at exit)|at exit done/.test(l))
    .map((l) => l.replace(/^.*?\[lua\] .*?:\d+: /, '').replace(/, context: .*$/, ''));
}

test('QUIT waits for running and premature timers to end, as nginx', async (t) => {
  const pair = await luaPair(t, http);
  const expected = ['pending timer done, premature: true', 'a new timer at exit: nil process exiting', 'a timer for now at exit done, premature: false', 'running timer done'];
  const runs = [quitAndRead(pair.gh), ...(pair.ng ? [quitAndRead(pair.ng)] : [])];
  const [gh, ng] = await Promise.all(runs);
  assert.deepEqual(gh, expected);
  if (ng) assert.deepEqual(ng, expected);
});
