// Timers past lua_max_running_timers (t/152-timer-every.t TEST 8): OpenResty refuses the run with
// an alert naming where the function was defined, and a repeating timer keeps its schedule.
// Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23 on the same config.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { startPair } from '../kit/pair.ts';
import { logged, LUA_MODULES, same, sameLog } from './hooks-kit.ts';

const pair = await startPair({ after }, {
  conf: `${LUA_MODULES}load_module /usr/lib/nginx/modules/ngx_http_set_misc_module.so;
error_log logs/error.log info;
events {}
http {
    access_log off;
    lua_max_running_timers 2;
    lua_shared_dict runs 1m;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location = /ndk-in-timer {
            content_by_lua_block {
                ngx.timer.at(0, function()
                    ngx.log(ngx.WARN, "timer: ", ndk.set_var.set_unescape_uri("a%20b"), " ", ndk.set_var.set_encode_base32("ab"))
                end)
                ngx.say("ok")
            }
        }
        location = /busy {
            content_by_lua_block {
                local function slow() ngx.sleep(0.3) end
                local function tick() ngx.shared.runs:incr("ticks", 1, 0) end
                ngx.timer.at(0, slow)
                ngx.timer.at(0, slow)
                -- due while both slots are taken: refused each time until they are free
                ngx.timer.every(0.05, tick)
                ngx.sleep(0.5)
                ngx.say("ticks after the slow ones: ", (ngx.shared.runs:get("ticks") or 0) > 0)
            }
        }
    }
}
`,
});

test('ndk.set_var works in a timer (no request: the directives\' defaults)', async () => {
  assert.equal((await same(pair, '/ndk-in-timer')).body, 'ok\n');
  const lines = await sameLog(pair, /timer: a b/);
  assert.match(lines[0], /^\[warn\] \[lua\] content_by_lua\(nginx.conf:\d+\):3: timer: a b c5h0====, context: ngx\.timer/);
});

test('a timer due while lua_max_running_timers run is refused with an alert; an every timer runs again later', async () => {
  assert.equal((await same(pair, '/busy')).body, 'ticks after the slow ones: true\n');
  // how many runs were refused depends on timing; each is this line
  for (const srv of [pair.gh, pair.ng]) {
    if (!srv) continue;
    const lines = await logged(srv, /lua_max_running_timers are not enough/);
    assert.ok(lines.length > 0);
    for (const line of lines) {
      assert.equal(line, '[alert] lua failed to run timer with function defined at =content_by_lua(nginx.conf:21):3: 2 lua_max_running_timers are not enough');
    }
  }
});
