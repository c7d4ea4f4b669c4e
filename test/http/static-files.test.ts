/**
 * Static files, root/alias, index, try_files, types: each request is sent to
 * Gatehouse and to Debian's nginx 1.22 on the same config (the reference),
 * and the answers must match byte for byte (Date aside).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { FIXED_MTIME, logLines, same, startPair } from './static-kit.ts';

const conf = `
events {}
http {
    server_tokens off;
    access_log off;
    include %%PREFIX%%/mime.types;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;

        location /alias/ { alias %%PREFIX%%/data/; }
        location ~ ^/re/(\\w+)/(.*)$ { alias %%PREFIX%%/data/$1/$2; add_header X-File $request_filename; }
        location /vars/ { add_header X-Root $document_root; add_header X-File $request_filename; }
        location /many/ { alias %%PREFIX%%/data/; index none.html $arg_i.html second.html; }
        location /abs/ { index /html-index.html; }
        location /quiet/ { log_not_found off; }
        location /tf/ { try_files $uri $uri/ /tf-fallback.html; }
        location /tf-code/ { try_files /nothing =418; }
        location /tf-named/ { try_files /nothing @named; }
        location @named { return 200 "named $uri\\n"; }
        location /notypes/ { types { } default_type application/x-test; }
        location /own-types/ { types { text/x-own own; } }
    }
}
`;

const files = {
  'mime.types': fs.readFileSync(new URL('../../conf/mime.types', import.meta.url), 'latin1'),
  'html/index.html': 'root index\n',
  'html/page.html': '<p>page</p>\n',
  'html/style.css': 'b{}\n',
  'html/UPPER.CSS': 'B{}\n',
  'html/noext': 'plain\n',
  'html/dir/file.txt': 'in dir\n',
  'html/empty/.keep': '',
  'html/vars/a.txt': 'a\n',
  'html/html-index.html': 'absolute index\n',
  'html/abs/x': '',
  'html/quiet/.keep': '',
  'html/tf/real.txt': 'real\n',
  'html/tf/sub/index.html': 'tf sub index\n',
  'html/tf-fallback.html': 'fallback\n',
  'html/notypes/a.html': 'no types\n',
  'html/own-types/a.own': 'own\n',
  'html/own-types/a.html': 'own html\n',
  'data/one.txt': 'alias one\n',
  'data/second.html': 'second\n',
  'data/pick.html': 'picked\n',
  'data/x/y.js': 'regex alias\n',
};

test('static files, root, alias, index, try_files and types match nginx', async (t) => {
  const pair = await startPair(t, { conf, files });
  const r = await same(t, pair, 'GET /page.html HTTP/1.1');
  assert.equal(r.status, 200);
  assert.equal(r.body.toString(), '<p>page</p>\n');
  assert.equal(r.header('content-type'), 'text/html');
  assert.equal(r.header('last-modified'), FIXED_MTIME.toUTCString());
  assert.equal(r.header('etag'), `"${(FIXED_MTIME.getTime() / 1000).toString(16)}-c"`);
  assert.equal(r.header('accept-ranges'), 'bytes');

  assert.equal((await same(t, pair, 'GET /style.css HTTP/1.1')).header('content-type'), 'text/css');
  assert.equal((await same(t, pair, 'GET /UPPER.CSS HTTP/1.1')).header('content-type'), 'text/css');
  assert.equal((await same(t, pair, 'GET /noext HTTP/1.1')).header('content-type'), 'text/plain');
  const head = await same(t, pair, 'HEAD /page.html HTTP/1.1');
  assert.equal(head.header('content-length'), '12');
  assert.equal(head.body.length, 0);
  await same(t, pair, 'GET /page.html HTTP/1.0');

  // index, directories
  assert.equal((await same(t, pair, 'GET / HTTP/1.1')).body.toString(), 'root index\n');
  const dir = await same(t, pair, 'GET /dir HTTP/1.1');
  assert.equal(dir.status, 301);
  assert.equal(dir.header('location'), `http://localhost:${pair.gh.port(8080)}/dir/`);
  assert.equal((await same(t, pair, 'GET /dir?a=1 HTTP/1.1')).header('location'), `http://localhost:${pair.gh.port(8080)}/dir/?a=1`);
  assert.equal((await same(t, pair, 'GET /empty/ HTTP/1.1')).status, 403);
  assert.equal((await same(t, pair, 'GET /missing HTTP/1.1')).status, 404);
  assert.equal((await same(t, pair, 'GET /missing/ HTTP/1.1')).status, 404);
  assert.equal((await same(t, pair, 'GET /page.html/ HTTP/1.1')).status, 404);
  assert.equal((await same(t, pair, 'GET /quiet/none HTTP/1.1')).status, 404);
  assert.equal((await same(t, pair, 'POST /page.html HTTP/1.1')).status, 405);
  assert.equal((await same(t, pair, 'POST /missing HTTP/1.1')).status, 404);
  assert.equal((await same(t, pair, 'PUT /page.html HTTP/1.1')).status, 405);
  assert.equal((await same(t, pair, 'DELETE /dir/ HTTP/1.1')).status, 405);

  // alias, regex alias with captures, variables
  assert.equal((await same(t, pair, 'GET /alias/one.txt HTTP/1.1')).body.toString(), 'alias one\n');
  const re = await same(t, pair, 'GET /re/x/y.js HTTP/1.1');
  assert.equal(re.body.toString(), 'regex alias\n');
  assert.equal(re.header('x-file'), pair.gh.path('data/x/y.js'));
  const vars = await same(t, pair, 'GET /vars/a.txt HTTP/1.1');
  assert.equal(vars.header('x-root'), pair.gh.path('html'));
  assert.equal(vars.header('x-file'), pair.gh.path('html/vars/a.txt'));
  assert.equal((await same(t, pair, 'GET /many/ HTTP/1.1')).body.toString(), 'second\n');
  assert.equal((await same(t, pair, 'GET /many/?i=pick HTTP/1.1')).body.toString(), 'picked\n');
  assert.equal((await same(t, pair, 'GET /abs/ HTTP/1.1')).body.toString(), 'absolute index\n');

  // try_files
  assert.equal((await same(t, pair, 'GET /tf/real.txt HTTP/1.1')).body.toString(), 'real\n');
  assert.equal((await same(t, pair, 'GET /tf/sub HTTP/1.1')).status, 301);
  assert.equal((await same(t, pair, 'GET /tf/nothing?x=1 HTTP/1.1')).body.toString(), 'fallback\n');
  assert.equal((await same(t, pair, 'GET /tf-code/x HTTP/1.1')).status, 418);
  assert.equal((await same(t, pair, 'GET /tf-named/x HTTP/1.1')).body.toString(), 'named /tf-named/x\n');

  // types
  assert.equal((await same(t, pair, 'GET /notypes/a.html HTTP/1.1')).header('content-type'), 'application/x-test');
  assert.equal((await same(t, pair, 'GET /own-types/a.own HTTP/1.1')).header('content-type'), 'text/x-own');
  assert.equal((await same(t, pair, 'GET /own-types/a.html HTTP/1.1')).header('content-type'), 'text/plain');

  // nginx's error log lines
  const gh = pair.gh;
  assert.equal(logLines(gh, /\[error\].*open\(\) ".*\/html\/missing" failed \(2: No such file or directory\)/).length, 2);
  assert.equal(logLines(gh, /\/quiet\/none/).length, 0);
  assert.equal(logLines(gh, /\[error\].*directory index of ".*\/html\/empty\/" is forbidden/).length, 1);
  assert.equal(logLines(gh, /\[error\].*".*\/html\/missing\/index.html" is not found \(2: No such file or directory\)/).length, 1);
  assert.equal(logLines(gh, /\[error\].*".*\/html\/page.html\/index.html" is not found \(20: Not a directory\)/).length, 1);
});

test('without mime.types only html, gif and jpg are known (nginx defaults)', async (t) => {
  const pair = await startPair(t, {
    conf: `events {}
http {
    server_tokens off;
    access_log off;
    server { listen 127.0.0.1:%%PORT_8080%%; root %%PREFIX%%/html; }
}`,
    files: { 'html/a.css': 'x', 'html/a.jpg': 'x', 'html/a.html': 'x' },
  });
  assert.equal((await same(t, pair, 'GET /a.css HTTP/1.1')).header('content-type'), 'text/plain');
  assert.equal((await same(t, pair, 'GET /a.jpg HTTP/1.1')).header('content-type'), 'image/jpeg');
  assert.equal((await same(t, pair, 'GET /a.html HTTP/1.1')).header('content-type'), 'text/html');
});

test('symlinks are followed', async (t) => {
  const pair = await startPair(t, {
    conf: `events {}
http {
    server_tokens off;
    access_log off;
    server { listen 127.0.0.1:%%PORT_8080%%; root %%PREFIX%%/html; }
}`,
    files: { 'html/target.txt': 'target\n', 'html/d/x.txt': 'x\n' },
  });
  for (const srv of [pair.gh, pair.ng]) {
    if (!srv) continue;
    fs.symlinkSync(srv.path('html/target.txt'), srv.path('html/link.txt'));
    fs.symlinkSync(srv.path('html/d'), srv.path('html/dlink'));
    fs.symlinkSync(srv.path('html/nowhere'), srv.path('html/dangling'));
  }
  const r = await same(t, pair, 'GET /link.txt HTTP/1.1');
  assert.equal(r.body.toString(), 'target\n');
  assert.equal((await same(t, pair, 'GET /dlink/x.txt HTTP/1.1')).body.toString(), 'x\n');
  assert.equal((await same(t, pair, 'GET /dlink HTTP/1.1')).status, 301);
  assert.equal((await same(t, pair, 'GET /dangling HTTP/1.1')).status, 404);
});
