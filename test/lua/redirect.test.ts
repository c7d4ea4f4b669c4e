// ngx.redirect's refusals: a uri with bytes that would split the Location header, and a call
// after the head went out. Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { luaPair, same, sameLog } from './hooks-kit.ts';

const pair = await luaPair({ after }, String.raw`
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /unsafe-cr { content_by_lua_block { ngx.redirect("http://example.com/a\rb:\"c\\d") } }
        location /unsafe-lf-first { content_by_lua_block { ngx.redirect("\nfoo:http://example.com/") } }
        location /no-args { content_by_lua_block { ngx.redirect() } }
        location /tab-is-fine { content_by_lua_block { ngx.redirect("/a\tb") } }
        location /late {
            content_by_lua_block {
                ngx.say("sent")
                ngx.log(ngx.ERR, "redirect late: ", select(2, pcall(ngx.redirect, "/x")))
            }
        }
    }
`);

test('a CR in the uri: 500, no Location, the uri logged with nginx log escaping', async () => {
  const r = await same(pair, '/unsafe-cr');
  assert.equal(r.status, 500);
  assert.ok(!r.headers.some(([n]) => n === 'Location' || n === 'b'));
  const [line] = await sameLog(pair, /unsafe byte "0x0d"/);
  assert.equal(line, String.raw`[error] lua entry thread aborted: runtime error: content_by_lua(nginx.conf:9):1: unsafe byte "0x0d" in redirect uri "http://example.com/a\x0Db:\x22c\x5Cd"`);
});

test('an LF first in the uri: 500; a tab is let through', async () => {
  assert.equal((await same(pair, '/unsafe-lf-first')).status, 500);
  await sameLog(pair, /unsafe byte "0x0a" in redirect uri "\\x0Afoo:/);
  const r = await same(pair, '/tab-is-fine');
  assert.equal(r.status, 302);
  assert.deepEqual(r.headers.filter(([n]) => n === 'Location'), [['Location', '/a\tb']]);
});

test('no arguments: 500 and "expecting one or two arguments"', async () => {
  assert.equal((await same(pair, '/no-args')).status, 500);
  await sameLog(pair, /expecting one or two arguments/);
});

test('after output: the call fails with OpenResty\'s message and the response goes on', async () => {
  assert.equal((await same(pair, '/late')).body, 'sent\n');
  const [line] = await sameLog(pair, /redirect late: /);
  assert.match(line, /redirect late: .*attempt to call ngx\.redirect after sending out the headers/);
});
