/**
 * ngx_http_addition_filter_module: bodies added before and after a static
 * page and a proxied one (head, weak ETag, no length, chunked on HTTP/1.1),
 * addition_types, no addition for other statuses, HEAD, a location adding
 * itself, and sub_filter on the page beside it. Reference: Debian's nginx 1.22.
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
        root %%PREFIX%%/html;
        location /both/ {
            add_before_body /parts/header.html;
            add_after_body /parts/footer.html;
        }
        location /typed/ {
            addition_types text/plain;
            add_after_body /parts/footer.html;
        }
        location /proxied/ {
            add_before_body /parts/header.html;
            sub_filter page PAGE;
            proxy_pass http://127.0.0.1:%%PORT_8080%%/both/;
        }
        location = /self.html {
            add_after_body /self.html;
        }
        location = /missing.html {
            add_after_body /parts/footer.html;
        }
        location /parts/ { }
    }
}
`;

const files = {
  'html/both/page.html': '<p>page</p>\n',
  'html/both/text.txt': 'text\n',
  'html/typed/text.txt': 'typed\n',
  'html/parts/header.html': '<h1>head</h1>\n',
  'html/parts/footer.html': '<footer/>\n',
  'html/self.html': 'self\n',
};

const pair = sharedPair({ conf, files });

test('before and after a static page, over HTTP/1.0 and chunked HTTP/1.1', async () => {
  const r = await same(pair(), 'GET /both/page.html HTTP/1.0');
  assert.equal(r.body.toString(), '<h1>head</h1>\n<p>page</p>\n<footer/>\n');
  assert.equal(r.header('content-length'), undefined);
  assert.match(r.header('etag') ?? '', /^W\//);
  const chunked = await same(pair(), 'GET /both/page.html HTTP/1.1');
  assert.equal(chunked.header('transfer-encoding'), 'chunked');
  assert.equal(chunked.body.toString(), '<h1>head</h1>\n<p>page</p>\n<footer/>\n');
});

test('addition_types, other statuses, HEAD and a location that adds itself', async () => {
  assert.equal((await same(pair(), 'GET /both/text.txt HTTP/1.0')).body.toString(), 'text\n');
  assert.equal((await same(pair(), 'GET /typed/text.txt HTTP/1.0')).body.toString(), 'typed\n<footer/>\n');
  assert.equal((await same(pair(), 'GET /missing.html HTTP/1.0')).status, 404);
  const head = await same(pair(), 'HEAD /both/page.html HTTP/1.0');
  assert.equal(head.body.length, 0);
  assert.equal((await same(pair(), 'GET /self.html HTTP/1.0')).body.toString(), 'self\nself\n');
});

test('a proxied page with sub_filter beside the addition', async () => {
  const r = await same(pair(), 'GET /proxied/page.html HTTP/1.0');
  assert.equal(r.body.toString(), '<h1>head</h1>\n<h1>head</h1>\n<p>PAGE</p>\n<footer/>\n');
});
