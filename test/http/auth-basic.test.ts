/**
 * auth_basic with every password scheme of an htpasswd file, realms with
 * variables and `off`, nginx's error log lines; allow/deny and satisfy;
 * auth_delay. Answers are compared with Debian's nginx 1.22 (the
 * reference); the hashes were made with `openssl passwd` and libc's crypt.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { logLines, same, startPair } from './static-kit.ts';

const htpasswd = [
  '# users',
  'md5:$1$Qx7salty$CTNbSlQIiub1Zc26KTLmi.',
  'apr1:$apr1$Qx7salty$rMBukkJYssc0C9SeJ3KbD/',
  'sha256:$5$Qx7salty$zAL6a2o/gVbapbR4SGHlXUR9HXe3ZMeUTnIQijyTik5',
  'sha512:$6$Qx7salty$61V.MF2b2nAwCtueQwGSDynk79uzf/KcmROHXPh3krJIErA4wd3NnHOU3XnK/HSpzMJVKtWzHzSOV.sGnxwsJ1',
  'des:Ab2WWzJsOfyqA',
  'sha:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=',
  'ssha:{SSHA}gVK8WC9YyFT1gMsQHTGCgT3sSv5zYWx0',
  'plain:{PLAIN}secret:comment',
  'bcrypt:$2y$05$abcdefghijklmnopqrstuuOQiyCxlgf/oeuTqixKmWdcYUh4Hjl0a',
  'locked:!',
  '',
].join('\n');

const conf = `
events {}
http {
    server_tokens off;
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        auth_basic "closed $host";
        auth_basic_user_file htpasswd;

        location /open/ { auth_basic off; }
        location /varoff/ { auth_basic $arg_realm; }
        location /nofile/ { auth_basic_user_file %%PREFIX%%/none; }
        location /deny/ { auth_basic off; deny 127.0.0.1; allow all; }
        location /allow/ { auth_basic off; allow 127.0.0.0/8; deny all; }
        location /v6/ { auth_basic off; allow ::1; deny all; }
        location /all/ { satisfy all; allow 127.0.0.1; }
        location /any/ { satisfy any; deny all; }
        location /any-allowed/ { satisfy any; allow 127.0.0.1; deny all; }
        location /delay/ { auth_delay 200ms; }
    }
}
`;

const files = {
  'htpasswd': htpasswd,
  'html/index.html': 'SECRET\n', 'html/open/index.html': 'OPEN\n', 'html/varoff/index.html': 'V\n',
  'html/nofile/index.html': 'N\n', 'html/deny/index.html': 'D\n', 'html/allow/index.html': 'A\n',
  'html/v6/index.html': '6\n', 'html/all/index.html': 'ALL\n', 'html/any/index.html': 'ANY\n',
  'html/any-allowed/index.html': 'ANYOK\n', 'html/delay/index.html': 'DELAY\n',
};

const auth = (path: string, user: string, pass: string) =>
  `GET ${path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}\r\nConnection: close\r\n\r\n`;

test('auth_basic password schemes and realms match nginx', async (t) => {
  const pair = await startPair(t, { conf, files });
  const none = await same(t, pair, 'GET / HTTP/1.1');
  assert.equal(none.status, 401);
  assert.equal(none.header('www-authenticate'), 'Basic realm="closed localhost"');
  for (const user of ['md5', 'apr1', 'sha256', 'sha512', 'des', 'sha', 'ssha', 'plain', 'bcrypt']) {
    const ok = await same(t, pair, auth('/', user, 'secret'));
    assert.equal(ok.status, 200, user);
    assert.equal(ok.body.toString(), 'SECRET\n');
    assert.equal((await same(t, pair, auth('/', user, 'wrong'))).status, 401, `${user} wrong password`);
  }
  assert.equal((await same(t, pair, auth('/', 'locked', ''))).status, 401);
  assert.equal((await same(t, pair, auth('/', 'nobody', 'secret'))).status, 401);
  assert.equal((await same(t, pair, auth('/', '', 'secret'))).status, 401);
  assert.equal((await same(t, pair, 'GET / HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic !!!\r\nConnection: close\r\n\r\n')).status, 401);
  assert.equal((await same(t, pair, 'GET /open/ HTTP/1.1')).body.toString(), 'OPEN\n');
  assert.equal((await same(t, pair, 'GET /varoff/?realm=off HTTP/1.1')).status, 200);
  assert.equal((await same(t, pair, 'GET /varoff/?realm=R HTTP/1.1')).header('www-authenticate'), 'Basic realm="R"');
  assert.equal((await same(t, pair, auth('/nofile/', 'plain', 'secret'))).status, 403);

  const gh = pair.gh;
  assert.ok(logLines(gh, /\[info\].*no user\/password was provided for basic authentication/).length > 0);
  assert.equal(logLines(gh, /\[error\].*user "md5": password mismatch/).length, 1);
  assert.equal(logLines(gh, /\[error\].*user "nobody" was not found in ".*\/htpasswd"/).length, 1);
  assert.equal(logLines(gh, /\[error\].*open\(\) ".*\/none" failed \(2: No such file or directory\)/).length, 1);
});

test('allow, deny and satisfy match nginx', async (t) => {
  const pair = await startPair(t, { conf, files });
  assert.equal((await same(t, pair, 'GET /deny/ HTTP/1.1')).status, 403);
  assert.equal((await same(t, pair, 'GET /allow/ HTTP/1.1')).status, 200);
  assert.equal((await same(t, pair, 'GET /v6/ HTTP/1.1')).status, 403);
  assert.equal((await same(t, pair, 'GET /all/ HTTP/1.1')).status, 401, 'satisfy all: allowed, but no password');
  assert.equal((await same(t, pair, auth('/all/', 'plain', 'secret'))).status, 200);
  const any = await same(t, pair, 'GET /any/ HTTP/1.1');
  assert.equal(any.status, 401, 'satisfy any: the 401 wins over the 403');
  assert.equal(any.header('www-authenticate'), 'Basic realm="closed localhost"');
  assert.equal((await same(t, pair, auth('/any/', 'plain', 'secret'))).status, 200);
  const anyOk = await same(t, pair, 'GET /any-allowed/ HTTP/1.1');
  assert.equal(anyOk.status, 200);
  assert.equal(anyOk.header('www-authenticate'), undefined);
  assert.equal(logLines(pair.gh, /\[error\].*access forbidden by rule/).length, 2);
});

test('auth_delay holds back a 401 and logs it', async (t) => {
  const pair = await startPair(t, { conf, files });
  assert.equal((await same(t, pair, auth('/delay/', 'plain', 'wrong'))).status, 401);
  assert.equal((await same(t, pair, auth('/delay/', 'plain', 'secret'))).status, 200);
  assert.equal(logLines(pair.gh, /\[info\].*delaying unauthorized request/).length, 1);
});
