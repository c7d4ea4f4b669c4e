// What a timer's function may not call (t/107-timer-errors.t): OpenResty's C functions refuse a
// timer as `API disabled in the context of ngx.timer`; the functions resty.core implements see the
// timer's fake request and are refused by their C side as `API disabled in the current context`.
// Each call's error is taken with pcall in one timer and logged with the caller's position, so the
// whole list compares in one go. Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { luaPair, same, sameLog } from './hooks-kit.ts';

/** Each call a timer makes, by name (one line each, so the position in the error names it; no tail
 * calls, which would leave the position out). */
const CALLS: Array<[string, string]> = [
  ['var', 'local _ = ngx.var.uri'],
  ['status read', 'local _ = ngx.status'],
  ['status write', 'ngx.status = 201'],
  ['raw_header', 'local _ = ngx.req.raw_header()'],
  ['get_headers', 'local _ = ngx.req.get_headers()'],
  ['set_header', 'ngx.req.set_header("X-A", "b")'],
  ['clear_header', 'ngx.req.clear_header("X-A")'],
  ['set_uri', 'ngx.req.set_uri("/x")'],
  ['set_uri_args', 'ngx.req.set_uri_args("a=1")'],
  ['get_uri_args', 'local _ = ngx.req.get_uri_args()'],
  ['discard_body', 'ngx.req.discard_body()'],
  ['init_body', 'ngx.req.init_body()'],
  ['header', 'local _ = ngx.header["X-A"]'],
  ['get_method', 'local _ = ngx.req.get_method()'],
  ['set_method', 'ngx.req.set_method(ngx.HTTP_POST)'],
  ['http_version', 'local _ = ngx.req.http_version()'],
  ['get_post_args', 'local _ = ngx.req.get_post_args()'],
  ['get_body_data', 'local _ = ngx.req.get_body_data()'],
  ['get_body_file', 'local _ = ngx.req.get_body_file()'],
  ['set_body_data', 'ngx.req.set_body_data("x")'],
  ['set_body_file', 'ngx.req.set_body_file("/tmp/x")'],
  ['append_body', 'ngx.req.append_body("x")'],
  ['finish_body', 'ngx.req.finish_body()'],
  ['headers_sent', 'local _ = ngx.headers_sent'],
  ['redirect', 'ngx.redirect("/x")'],
  ['exec', 'ngx.exec("/x")'],
  ['say', 'ngx.say("x")'],
  ['print', 'ngx.print("x")'],
  ['flush', 'ngx.flush()'],
  ['send_headers', 'ngx.send_headers()'],
  ['read_body', 'ngx.req.read_body()'],
  ['on_abort', 'ngx.on_abort(function() end)'],
  ['capture', 'ngx.location.capture("/x")'],
  ['capture_multi', 'ngx.location.capture_multi({{"/x"}})'],
  ['eof', 'ngx.eof()'],
  ['req.socket', 'ngx.req.socket()'],
];

const pair = await luaPair({ after }, `
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /t {
            content_by_lua_block {
                local calls = {
${CALLS.map(([name, code]) => `                    { "${name}", function() ${code} end },`).join('\n')}
                }
                ngx.timer.at(0, function()
                    for _, c in ipairs(calls) do
                        local ok, err = pcall(c[2])
                        ngx.log(ngx.ERR, "refused ", c[1], ": ", err)
                    end
                    ngx.log(ngx.ERR, "all calls made")
                end)
                ngx.say("ok")
            }
        }
    }
`);

test('a timer is refused the request\'s API with OpenResty\'s messages and positions', async () => {
  await same(pair, '/t');
  await sameLog(pair, /all calls made/);
  const lines = await sameLog(pair, /refused /);
  assert.equal(lines.length, CALLS.length);
  // spot checks: one of each message, at the caller's line
  assert.equal(lines[0], '[error] [lua] content_by_lua(nginx.conf:10):43: refused var: content_by_lua(nginx.conf:10):3: API disabled in the current context, context: ngx.timer, client: 127.0.0.1, server: 127.0.0.1:PORT');
  assert.match(lines[24], /refused redirect: content_by_lua\(nginx\.conf:10\):27: API disabled in the context of ngx\.timer, context: ngx\.timer/);
});
