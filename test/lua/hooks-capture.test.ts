// ngx.location.capture and capture_multi: subrequests whose status, headers and body come back to
// Lua. Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23 on the same config.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { luaPair, same } from './hooks-kit.ts';

const pair = await luaPair({ after }, `
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /sub/return { return 201 "returned $arg_x\\n"; }
        location /sub/lua {
            content_by_lua_block {
                ngx.header["X-Sub"] = "yes"
                ngx.sleep(0.01)
                ngx.say("lua sub ", ngx.var.arg_n, " ", ngx.req.get_method(), " internal ", tostring(ngx.req.is_internal()))
            }
        }
        location /one {
            content_by_lua_block {
                local res = ngx.location.capture("/sub/return?x=1")
                ngx.say(res.status, " [", res.body, "] ", res.header["Content-Type"], " ", tostring(res.truncated))
                res = ngx.location.capture("/sub/lua", { args = { n = "2" } })
                ngx.say(res.status, " [", res.body, "] ", res.header["X-Sub"])
                res = ngx.location.capture("/sub/lua", { args = "n=3", method = ngx.HTTP_HEAD })
                ngx.say(res.status, " [", res.body, "]")
            }
        }
        location /multi {
            content_by_lua_block {
                local a, b, c = ngx.location.capture_multi({
                    { "/sub/lua", { args = "n=a" } },
                    { "/sub/return", { args = { x = "b" } } },
                    { "/sub/lua?n=c" },
                })
                ngx.print(a.body, b.body, c.body)
            }
        }
        location /missing {
            content_by_lua_block {
                local res = ngx.location.capture("/nowhere")
                ngx.say(res.status)
            }
        }
    }
`, { 'html/index.html': 'x' });

test('ngx.location.capture: status, body, headers of a return, of a Lua location (that sleeps), HEAD', async () => {
  const r = await same(pair, '/one');
  assert.equal(r.body, '201 [returned 1\n] text/plain false\n200 [lua sub 2 GET internal true\n] yes\n200 []\n');
});

test('ngx.location.capture_multi runs them together and returns them in order', async () => {
  assert.equal((await same(pair, '/multi')).body, 'lua sub a GET internal true\nreturned b\nlua sub c GET internal true\n');
});

test('a capture of a location that is not there is its 404', async () => {
  assert.equal((await same(pair, '/missing')).body, '404\n');
});
