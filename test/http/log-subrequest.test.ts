/**
 * `log_subrequest on`: the subrequests of SSI includes and of the addition
 * filter are written to the access log (with the location's log and format)
 * before their request, in the order they end; with the default `off` only
 * the request is. Reference: Debian's nginx 1.22.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { same, sharedPair } from './locations-kit.ts';

const conf = `
events {}
http {
    log_format uri "$uri $status";
    access_log %%PREFIX%%/access.log uri;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        root %%PREFIX%%/html;
        location /ssi/ { ssi on; }
        location /add/ { add_before_body /logged/before.html; add_after_body /quiet/after.html; }
        location /logged/ { log_subrequest on; }
        location /quiet/ { }
    }
}
`;

const files = {
  'html/ssi/page.html': 'a<!--# include virtual="/logged/one.html" -->b<!--# include virtual="/quiet/two.html" -->c\n',
  'html/add/page.html': 'page\n',
  'html/logged/one.html': '1',
  'html/logged/before.html': 'before\n',
  'html/quiet/two.html': '2',
  'html/quiet/after.html': 'after\n',
};

const pair = sharedPair({ conf, files });

test('subrequests are logged where log_subrequest is on', async () => {
  assert.equal((await same(pair(), 'GET /ssi/page.html HTTP/1.0')).body.toString(), 'a1b2c\n');
  assert.equal((await same(pair(), 'GET /add/page.html HTTP/1.0')).body.toString(), 'before\npage\nafter\n');
  for (const srv of [pair().gh, pair().ng]) {
    if (!srv) continue;
    await srv.waitForLog('access.log', /^\/add\/page\.html 200$/m, 10_000);
    assert.equal(srv.readFile('access.log'), '/logged/one.html 200\n/ssi/page.html 200\n/logged/before.html 200\n/add/page.html 200\n');
  }
});
