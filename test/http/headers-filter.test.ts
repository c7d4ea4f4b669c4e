/**
 * add_header (inheritance, `always`, empty values), expires, add_trailer,
 * and the CORS and security-header patterns built from them. Each request
 * goes to Gatehouse and to Debian's nginx 1.22 (the reference) and the
 * answers must match.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FIXED_MTIME, same, startPair } from './static-kit.ts';

const conf = `
events {}
http {
    server_tokens off;
    access_log off;
    add_header X-Http http;
    types { text/html html; text/css css; image/png png; application/json json; }
    # the cache policy of the best-known public config collections: expires by type, in months and years
    map $sent_http_content_type $expires_by_type {
        default off;
        ~*text/html epoch;
        ~*text/css 1y;
        ~*image/ 1M;
        ~*application/json 0;
    }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        add_header X-Server server;
        add_header X-Server-Always server always;

        location /inherit/ { }
        location /own/ { add_header X-Own own; }
        location /if/ {
            if ($arg_x) { add_header X-If if; }
        }
        location /empty/ { add_header X-Empty $http_x_missing; add_header X-Set $arg_v; }
        location /status/ {
            add_header X-Plain plain;
            add_header X-Always always always;
            return 404;
        }
        location /redirect/ { add_header X-Plain plain; return 302 /elsewhere; }
        location /etag/ { add_header ETag '"mine"'; add_header Last-Modified "Tue, 07 May 2024 00:00:00 GMT"; }
        location /etag-off/ { add_header ETag ""; }
        location /cache-control/ { add_header Cache-Control "no-store"; add_header Cache-Control private; }

        location /epoch/ { expires epoch; }
        location /max/ { expires max; }
        location /off/ { expires off; }
        location /zero/ { expires 0; }
        location /negative/ { expires -1h; }
        location /modified/ { expires modified 1d; }
        location /var/ { expires $arg_e; }
        location /year/ { expires 1y; }
        location /by-type/ { expires $expires_by_type; charset utf-8; charset_types text/css application/json; }
        location /month/ { expires modified 1M; }
        location /expires-404/ { expires 1h; return 404; }
        location /expires-cc/ { expires epoch; add_header Cache-Control public; }

        # CORS preflight answered by nginx itself
        location /api/ {
            if ($request_method = OPTIONS) {
                add_header Access-Control-Allow-Origin $http_origin;
                add_header Access-Control-Allow-Methods "GET, POST, OPTIONS";
                add_header Access-Control-Allow-Headers "Authorization, Content-Type";
                add_header Access-Control-Max-Age 86400;
                return 204;
            }
            add_header Access-Control-Allow-Origin $http_origin always;
            add_header Vary Origin always;
        }

        # security headers, HSTS also on errors
        location /secure/ {
            add_header Strict-Transport-Security "max-age=63072000; includeSubDomains" always;
            add_header X-Content-Type-Options nosniff;
            add_header X-Frame-Options DENY;
            add_header Content-Security-Policy "default-src 'self'";
            add_header Referrer-Policy no-referrer;
        }
    }
}
`;

const files = {
  'html/inherit/a.txt': 'a\n', 'html/own/a.txt': 'a\n', 'html/if/a.txt': 'a\n', 'html/empty/a.txt': 'a\n',
  'html/etag/a.txt': 'a\n', 'html/etag-off/a.txt': 'a\n', 'html/cache-control/a.txt': 'a\n',
  'html/epoch/a.txt': 'a\n', 'html/max/a.txt': 'a\n', 'html/off/a.txt': 'a\n', 'html/zero/a.txt': 'a\n',
  'html/negative/a.txt': 'a\n', 'html/modified/a.txt': 'a\n', 'html/var/a.txt': 'a\n', 'html/year/a.txt': 'a\n', 'html/by-type/a.html': 'a\n', 'html/by-type/a.css': 'a\n', 'html/by-type/a.png': 'a\n', 'html/by-type/a.json': '{}\n', 'html/by-type/a.txt': 'a\n', 'html/month/a.txt': 'a\n', 'html/expires-cc/a.txt': 'a\n',
  'html/api/data.json': '{}\n', 'html/secure/page.html': '<p>s</p>\n',
};

test('add_header inheritance, always and empty values match nginx', async (t) => {
  const pair = await startPair(t, { conf, files });
  const inherit = await same(t, pair, 'GET /inherit/a.txt HTTP/1.1');
  assert.equal(inherit.header('x-server'), 'server');
  assert.equal(inherit.header('x-http'), undefined, 'a server with its own add_header inherits none from http');
  const own = await same(t, pair, 'GET /own/a.txt HTTP/1.1');
  assert.equal(own.header('x-own'), 'own');
  assert.equal(own.header('x-server'), undefined);
  assert.equal((await same(t, pair, 'GET /if/a.txt HTTP/1.1')).header('x-server'), 'server');
  const viaIf = await same(t, pair, 'GET /if/a.txt?x=1 HTTP/1.1');
  assert.equal(viaIf.header('x-if'), 'if');
  assert.equal(viaIf.header('x-server'), undefined, 'an if block with add_header counts as a level');
  const empty = await same(t, pair, 'GET /empty/a.txt HTTP/1.1');
  assert.equal(empty.header('x-empty'), undefined);
  assert.equal(empty.header('x-set'), undefined);
  assert.equal((await same(t, pair, 'GET /empty/a.txt?v=1 HTTP/1.1')).header('x-set'), '1');
  const nf = await same(t, pair, 'GET /status/ HTTP/1.1');
  assert.equal(nf.status, 404);
  assert.equal(nf.header('x-plain'), undefined);
  assert.equal(nf.header('x-always'), 'always');
  assert.equal((await same(t, pair, 'GET /missing HTTP/1.1')).header('x-server-always'), 'server');
  assert.equal((await same(t, pair, 'GET /redirect/ HTTP/1.1')).header('x-plain'), 'plain');
  const etag = await same(t, pair, 'GET /etag/a.txt HTTP/1.1');
  assert.equal(etag.header('etag'), '"mine"');
  assert.equal(etag.header('last-modified'), 'Tue, 07 May 2024 00:00:00 GMT');
  assert.equal((await same(t, pair, 'GET /etag-off/a.txt HTTP/1.1')).header('etag'), undefined);
  assert.deepEqual((await same(t, pair, 'GET /cache-control/a.txt HTTP/1.1')).headerAll('cache-control'), ['no-store', 'private']);
});

test('expires matches nginx', async (t) => {
  const pair = await startPair(t, { conf, files });
  const epoch = await same(t, pair, 'GET /epoch/a.txt HTTP/1.1');
  assert.equal(epoch.header('expires'), 'Thu, 01 Jan 1970 00:00:01 GMT');
  assert.equal(epoch.header('cache-control'), 'no-cache');
  const max = await same(t, pair, 'GET /max/a.txt HTTP/1.1');
  assert.equal(max.header('expires'), 'Thu, 31 Dec 2037 23:55:55 GMT');
  assert.equal(max.header('cache-control'), 'max-age=315360000');
  assert.equal((await same(t, pair, 'GET /off/a.txt HTTP/1.1')).header('expires'), undefined);
  const zero = await same(t, pair, 'GET /zero/a.txt HTTP/1.1');
  assert.equal(zero.header('cache-control'), 'max-age=0');
  assert.equal(zero.header('expires'), zero.header('date'));
  assert.equal((await same(t, pair, 'GET /negative/a.txt HTTP/1.1')).header('cache-control'), 'no-cache');
  const modified = await same(t, pair, 'GET /modified/a.txt HTTP/1.1');
  assert.equal(modified.header('expires'), new Date(FIXED_MTIME.getTime() + 86_400_000).toUTCString());
  assert.equal(modified.header('cache-control'), 'no-cache', 'the file is older than a day: negative max-age');
  assert.equal((await same(t, pair, 'GET /var/a.txt?e=max HTTP/1.1')).header('cache-control'), 'max-age=315360000');
  assert.equal((await same(t, pair, 'GET /var/a.txt?e=2h HTTP/1.1')).header('cache-control'), 'max-age=7200');
  assert.equal((await same(t, pair, 'GET /var/a.txt?e=1y HTTP/1.1')).header('cache-control'), 'max-age=31536000');
  assert.equal((await same(t, pair, 'GET /var/a.txt?e=1M2d HTTP/1.1')).header('cache-control'), 'max-age=2764800');
  assert.equal((await same(t, pair, 'GET /var/a.txt?e=500ms HTTP/1.1')).header('expires'), undefined, 'ms is not a unit of seconds');
  assert.equal((await same(t, pair, 'GET /by-type/a.html HTTP/1.1')).header('cache-control'), 'no-cache');
  const css = await same(t, pair, 'GET /by-type/a.css HTTP/1.1');
  assert.equal(css.header('cache-control'), 'max-age=31536000');
  assert.equal(css.header('content-type'), 'text/css; charset=utf-8', 'the charset comes after expires saw the type');
  assert.equal((await same(t, pair, 'GET /by-type/a.png HTTP/1.1')).header('cache-control'), 'max-age=2592000');
  assert.equal((await same(t, pair, 'GET /by-type/a.json HTTP/1.1')).header('cache-control'), 'max-age=0');
  assert.equal((await same(t, pair, 'GET /by-type/a.txt HTTP/1.1')).header('cache-control'), undefined);
  const year = await same(t, pair, 'GET /year/a.txt HTTP/1.1');
  assert.equal(year.header('cache-control'), 'max-age=31536000');
  assert.equal(Date.parse(year.header('expires')!) - Date.parse(year.header('date')!), 31_536_000_000);
  assert.equal((await same(t, pair, 'GET /month/a.txt HTTP/1.1')).header('expires'), new Date(FIXED_MTIME.getTime() + 2_592_000_000).toUTCString());
  assert.equal((await same(t, pair, 'GET /var/a.txt?e=bad HTTP/1.1')).header('expires'), undefined);
  assert.equal((await same(t, pair, 'GET /var/a.txt HTTP/1.1')).header('expires'), undefined);
  assert.equal((await same(t, pair, 'GET /expires-404/ HTTP/1.1')).header('expires'), undefined);
  assert.deepEqual((await same(t, pair, 'GET /expires-cc/a.txt HTTP/1.1')).headerAll('cache-control'), ['no-cache', 'public']);
});

test('CORS preflight and security headers match nginx', async (t) => {
  const pair = await startPair(t, { conf, files });
  const pre = await same(t, pair, 'OPTIONS /api/data.json HTTP/1.1\r\nHost: localhost\r\nOrigin: https://app.example\r\n'
    + 'Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n');
  assert.equal(pre.status, 204);
  assert.equal(pre.header('access-control-allow-origin'), 'https://app.example');
  assert.equal(pre.header('access-control-allow-methods'), 'GET, POST, OPTIONS');
  assert.equal(pre.header('access-control-max-age'), '86400');
  assert.equal(pre.header('vary'), undefined, 'the if block has its own add_header list');
  const get = await same(t, pair, 'GET /api/data.json HTTP/1.1\r\nHost: localhost\r\nOrigin: https://app.example\r\nConnection: close\r\n\r\n');
  assert.equal(get.header('access-control-allow-origin'), 'https://app.example');
  assert.equal(get.header('vary'), 'Origin');
  const noOrigin = await same(t, pair, 'GET /api/data.json HTTP/1.1');
  assert.equal(noOrigin.header('access-control-allow-origin'), undefined);
  const missing = await same(t, pair, 'GET /api/none HTTP/1.1\r\nHost: localhost\r\nOrigin: https://app.example\r\nConnection: close\r\n\r\n');
  assert.equal(missing.status, 404);
  assert.equal(missing.header('access-control-allow-origin'), 'https://app.example');

  const page = await same(t, pair, 'GET /secure/page.html HTTP/1.1');
  assert.equal(page.header('strict-transport-security'), 'max-age=63072000; includeSubDomains');
  assert.equal(page.header('x-content-type-options'), 'nosniff');
  assert.equal(page.header('x-frame-options'), 'DENY');
  assert.equal(page.header('content-security-policy'), "default-src 'self'");
  const err = await same(t, pair, 'GET /secure/none HTTP/1.1');
  assert.equal(err.status, 404);
  assert.equal(err.header('strict-transport-security'), 'max-age=63072000; includeSubDomains');
  assert.equal(err.header('x-frame-options'), undefined);
});

test('add_trailer sends trailers in chunked responses only', async (t) => {
  const pair = await startPair(t, {
    conf: `
events {}
http {
    server_tokens off;
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        add_trailer X-Host $host;
        add_trailer X-Always always always;
        add_trailer X-Ranges $sent_http_accept_ranges;
        add_trailer X-Again $sent_trailer_x_host;
        add_trailer X-Empty '';
        location /plain/ { chunked_transfer_encoding off; }
    }
}`,
    files: { 'html/t.txt': 'SEE-THIS', 'html/plain/t.txt': 'x' },
  });
  const r = await same(t, pair, 'GET /t.txt HTTP/1.1');
  assert.ok(r.chunked);
  assert.equal(r.body.toString(), 'SEE-THIS');
  assert.deepEqual(r.trailers, [['X-Host', 'localhost'], ['X-Always', 'always'], ['X-Ranges', 'bytes'], ['X-Again', 'localhost']]);
  assert.deepEqual((await same(t, pair, 'GET /none HTTP/1.1')).trailers, [['X-Always', 'always']]);
  const old = await same(t, pair, 'GET /t.txt HTTP/1.0');
  assert.equal(old.chunked, false);
  assert.equal(old.header('content-length'), '8');
  assert.equal((await same(t, pair, 'GET /plain/t.txt HTTP/1.1')).chunked, false);
  assert.equal((await same(t, pair, 'HEAD /t.txt HTTP/1.1')).trailers.length, 0);
});
