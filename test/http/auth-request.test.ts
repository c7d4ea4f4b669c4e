/**
 * ngx_http_auth_request_module: the subrequest's status decides (2xx
 * allows, 401/403 are answered, others are 500), its WWW-Authenticate
 * headers go with a 401, `auth_request_set` keeps values from it across an
 * error_page redirect, `satisfy any` with allow/deny, a POST's body still
 * reaches the content handler, and `log_subrequest` logs the subrequest.
 * Reference: Debian's nginx 1.22.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ask, same, sharedPair } from './locations-kit.ts';

const conf = `
events {}
http {
    log_format sub "$uri $status";
    access_log %%PREFIX%%/access.log sub;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        # content from files: a return would answer in the rewrite phase, before the access phase
        root %%PREFIX%%/html;
        location /open { auth_request /auth-204; }
        location /denied { auth_request /auth-403; }
        location /login { auth_request /auth-401; }
        location /broken { auth_request /auth-404; }
        location /static { auth_request /auth-file; }
        location /off {
            auth_request /auth-403;
            location /off/inner { auth_request off; }
        }
        location /set {
            auth_request /auth-proxy;
            auth_request_set $who $upstream_http_x_user;
            auth_request_set $st $upstream_status;
            error_page 404 = /set-fallback;
        }
        location = /set-fallback { return 200 "who=$who st=$st\\n"; }
        location /any {
            satisfy any;
            deny all;
            auth_request /auth-proxy;
           
        }
        location /all {
            satisfy all;
            allow all;
            auth_request /auth-403;
           
        }
        location /post {
            auth_request /auth-proxy;
            proxy_pass http://127.0.0.1:%%PORT_8081%%/echo-body;
        }
        location /logged {
            auth_request /auth-logged;
           
        }
        location = /auth-logged { log_subrequest on; return 204; }
        location = /auth-204 { return 204; }
        location = /auth-403 { return 403; }
        location = /auth-404 { return 404; }
        location = /auth-401 { proxy_pass http://127.0.0.1:%%PORT_8081%%/401; }
        location = /auth-file { root %%PREFIX%%/html; }
        location = /auth-proxy {
            proxy_pass http://127.0.0.1:%%PORT_8081%%/user;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
        }
    }
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        # add_header runs for the client's request, not for a subrequest: this one is proxied
        location = /401 {
            add_header WWW-Authenticate "Basic realm=one" always;
            add_header WWW-Authenticate "Bearer" always;
            return 401;
        }
        location = /user { add_header X-User alice; return 200 "ignored body\\n"; }
        location = /echo-body {
            proxy_pass http://127.0.0.1:%%PORT_8081%%/user;
            add_header X-Body $request_body;
        }
    }
}
`;

const files: Record<string, string> = { 'html/auth-file': 'secret file\n' };
for (const name of ['open', 'denied', 'login', 'broken', 'static', 'any', 'all', 'logged', 'off/inner']) files[`html/${name}`] = `${name}\n`;
const pair = sharedPair({ conf, files });

test('2xx allows, 401/403 are answered, other statuses are 500', async () => {
  assert.equal((await same(pair(), 'GET /open HTTP/1.0')).body.toString(), 'open\n');
  assert.equal((await same(pair(), 'GET /denied HTTP/1.0')).status, 403);
  // every WWW-Authenticate goes with the 401 since nginx 1.23.0 (1.22 sent the first only)
  const login = await ask(pair().gh, 'GET /login HTTP/1.0');
  assert.equal(login.status, 401);
  assert.deepEqual(login.headers.filter(([k]) => k === 'WWW-Authenticate').map(([, v]) => v), ['Basic realm=one', 'Bearer']);
  assert.equal((await same(pair(), 'GET /broken HTTP/1.0')).status, 500);
  const stat = await same(pair(), 'GET /static HTTP/1.0');
  assert.equal(stat.body.toString(), 'static\n');
  assert.equal((await same(pair(), 'GET /off/inner HTTP/1.0')).body.toString(), 'off/inner\n');
  assert.equal((await same(pair(), 'GET /off/x HTTP/1.0')).status, 403);
});

test('auth_request_set values survive an internal redirect', async () => {
  const r = await same(pair(), 'GET /set HTTP/1.0');
  assert.equal(r.body.toString(), 'who=alice st=200\n');
});

test('satisfy any and all combine it with allow/deny', async () => {
  assert.equal((await same(pair(), 'GET /any HTTP/1.0')).body.toString(), 'any\n');
  assert.equal((await same(pair(), 'GET /all HTTP/1.0')).status, 403);
});

test('a POST body still reaches the proxied content after the auth subrequest', async () => {
  const r = await same(pair(), 'POST /post HTTP/1.0\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello');
  assert.equal(r.header('x-body'), 'hello');
});

test('log_subrequest on logs the auth subrequest before its request', async () => {
  await same(pair(), 'GET /logged HTTP/1.0');
  for (const srv of [pair().gh, pair().ng]) {
    if (!srv) continue;
    await srv.waitForLog('access.log', /^\/logged 200$/m, 10_000);
    assert.match(srv.readFile('access.log'), /^\/auth-logged 204\n\/logged 200$/m);
  }
});
