/**
 * error_page: internal redirects (the status kept, `=code`, `=`), named
 * locations, URL redirects, statuses from any phase (rewrite, access, the
 * static module's 404), inheritance, `recursive_error_pages`, the method
 * becoming GET. Reference: Debian's nginx 1.22 on the same configuration,
 * and nginx-tests' http_error_page.t / rewrite.t for the cases taken from
 * them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { same, sharedPair } from './locations-kit.ts';

const conf = `
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        error_page 404 /404.html;

        location /redirect200 { error_page 404 =200 http://example.com/; return 404; }
        location /redirect497 { error_page 497 https://example.com/; return 497; }
        location /redirect301 { error_page 404 =301 http://example.com/moved; return 404; }
        location /error302redirect { error_page 302 http://example.com/; return 302 "first"; }
        location /error302return302text { error_page 302 /return302text; return 302 "first"; }
        location /return302text { return 302 "http://example.com/"; }
        location /error302args { error_page 302 /return302args?1; return 302 "first"; }
        location /error302varargs { error_page 302 /return302args?$arg_a; return 302 "first"; }
        location /return302args { return 302 "http://example.com/$args"; }
        location /error302rewrite { error_page 302 /rewrite; return 302 "first"; }
        location /rewrite { rewrite ^ http://example.com/; }
        location /error302directory { error_page 302 /directory; return 302 "first"; }
        location /directory { }

        location /return204 { return 204; }
        location /return200 { return 200; }
        location /return405 { return 405; }
        location /return200text { return 200 "text"; }
        location /error404return405 { error_page 404 /return405; return 404; }
        location /error405return204 { error_page 405 /return204; return 405; }
        location /error405return200 { error_page 405 /return200; return 405; }
        location /error405return200text { error_page 405 /return200text; return 405; }
        location /error302return200text { error_page 302 /return200text; return 302 "text"; }
        location /error405return302text { error_page 405 /return302text; return 405; }

        location /equal { error_page 404 = /show; return 404; }
        location /show { return 200 "show $request_method $uri [$args]\\n"; }
        location /keepargs { error_page 404 /show?from=page; return 404; }
        location /named { error_page 403 @named; deny all; }
        location @named { return 200 "named $request_method\\n"; }
        location /own { error_page 403 /show; return 404; }
        location /inif { if ($arg_e) { error_page 404 = /show; } return 404; }

        location /bad-gateway { error_page 502 = /show; proxy_pass http://127.0.0.1:%%PORT_8082%%; }
        location /bad-gateway-keep { error_page 502 /show; proxy_pass http://127.0.0.1:%%PORT_8082%%; }
        location /loop1 { error_page 404 /missing1; return 404; }
        location /recursive {
            recursive_error_pages on;
            error_page 404 /recursive-target;
            return 404;
        }
        location /recursive-target { error_page 404 = /show; return 404; }
    }
}
`;

const pair = sharedPair({
  conf,
  files: { 'html/404.html': 'custom 404\n', 'html/directory/index.html': 'index\n' },
});
const get = (path: string) => same(pair(), `GET ${path} HTTP/1.1`);

test('error_page with a URL answers with a redirect (http_error_page.t)', async () => {
  const r200 = await get('/redirect200');
  assert.equal(r200.status, 302);
  assert.equal(r200.header('location'), 'http://example.com/');
  assert.equal((await get('/redirect497')).status, 302);
  assert.equal((await get('/redirect301')).status, 301);
  for (const [path, where] of [
    ['/error302redirect', 'http://example.com/'],
    ['/error302return302text', 'http://example.com/'],
    ['/error302args', 'http://example.com/1'],
    ['/error302varargs?a=2', 'http://example.com/2'],
    ['/error302rewrite', 'http://example.com/'],
  ]) {
    const r = await get(path);
    assert.equal(r.status, 302, path);
    assert.deepEqual(r.headerAll('location'), [where], path);
  }
  const dir = await get('/error302directory');
  assert.equal(dir.status, 301);
  assert.match(dir.header('location') ?? '', /^http:\/\/localhost:\d+\/directory\/$/);
});

test('the target answers with the error\'s status (rewrite.t)', async () => {
  assert.equal((await get('/error404return405')).status, 405);
  const r204 = await get('/error405return204');
  assert.equal(r204.status, 405);
  assert.equal(r204.header('content-length'), '0');
  const r200 = await get('/error405return200');
  assert.equal(r200.status, 405);
  assert.equal(r200.body.length, 0);
  const text = await get('/error405return200text');
  assert.equal(text.status, 405);
  assert.equal(text.body.toString(), 'text');
  const t302 = await get('/error302return200text');
  assert.equal(t302.status, 302);
  assert.equal(t302.header('location'), 'text');
  assert.equal(t302.body.toString(), 'text');
  assert.equal((await get('/error405return302text')).status, 302);
});

test('statuses from the static module and the access phase', async () => {
  const missing = await get('/no-such-file?q=1');
  assert.equal(missing.status, 404);
  assert.equal(missing.body.toString(), 'custom 404\n');
  const named = await same(pair(), 'POST /named HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
  assert.equal(named.status, 403);
  assert.equal(named.body.toString(), 'named POST\n');
});

test('a proxy\'s 502 goes to error_page too', async () => {
  // nothing listens on port 8082
  const eq = await get('/bad-gateway');
  assert.equal(eq.status, 200);
  assert.equal(eq.body.toString(), 'show GET /show []\n');
  const keep = await get('/bad-gateway-keep');
  assert.equal(keep.status, 502);
  assert.equal(keep.body.toString(), 'show GET /show []\n');
});

test('=, arguments, method, inheritance, if and recursion', async () => {
  const eq = await same(pair(), 'POST /equal?a=1 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
  assert.equal(eq.status, 200);
  assert.equal(eq.body.toString(), 'show GET /show []\n');
  const head = await same(pair(), 'HEAD /equal HTTP/1.1');
  assert.equal(head.status, 200);
  assert.equal((await get('/keepargs?a=1')).body.toString(), 'show GET /show [from=page]\n');
  // a level with its own error_page inherits none of the server's
  const own = await get('/own');
  assert.equal(own.status, 404);
  assert.match(own.body.toString(), /<title>404 Not Found<\/title>/);
  assert.equal((await get('/inif?e=1')).body.toString(), 'show GET /show []\n');
  assert.equal((await get('/inif')).body.toString(), 'custom 404\n');
  // /missing1 is a 404 again: without recursive_error_pages nginx's own page
  const once = await get('/loop1');
  assert.match(once.body.toString(), /<title>404 Not Found<\/title>/);
  const rec = await get('/recursive');
  assert.equal(rec.status, 200);
  assert.equal(rec.body.toString(), 'show GET /show []\n');
});
