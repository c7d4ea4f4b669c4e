/**
 * sub_filter: replacements (case-insensitive, first configured string wins
 * at a position, no overlaps), sub_filter_once, variables in strings and
 * replacements, sub_filter_types, sub_filter_last_modified, inheritance,
 * HEAD and empty bodies, gzip after the filter, SSI subrequests, and strings
 * cut by buffer boundaries of an unbuffered proxied body. Compared with
 * Debian's nginx 1.22 (the reference).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import { ask, piecewiseUpstream, same, startPair } from './ssi-kit.ts';
import type { Pair } from './ssi-kit.ts';
import type { TestContext } from 'node:test';
import { maskNameInResponse } from '../kit/server-name.ts';

function conf(upstream = '127.0.0.1:9'): string {
  return `
events {}
http {
    server_tokens off;
    access_log off;
    types { text/html html; text/plain txt; text/css css; }
    sub_filter foo bar;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        location / { }
        location /many/ { sub_filter_once off; sub_filter foo bar; sub_filter Hello Bye; }
        location /prio/ { sub_filter_once off; sub_filter abcd 1; sub_filter abc 2; sub_filter bc 3; sub_filter cdx 4; }
        location /once/ { sub_filter aa +; sub_filter bb -; }
        location /vars/ { sub_filter_once off; sub_filter $arg_from "<$arg_to|$uri>"; sub_filter X$arg_x ''; }
        location /types/ { sub_filter_types text/plain; sub_filter foo bar; }
        location /any/ { sub_filter_types *; sub_filter foo bar; }
        location /lm/ { sub_filter_last_modified on; sub_filter foo bar; }
        location /gz/ { gzip on; gzip_min_length 1; sub_filter_once off; sub_filter foo bar; }
        location /ssi/ { ssi on; sub_filter_once off; sub_filter foo bar; sub_filter part PART; }
        location /up/ {
            sub_filter_once off;
            sub_filter '<!--pattern-->' '[P]';
            sub_filter abcabd '[A]';
            sub_filter x '[x]';
            proxy_pass http://${upstream}/;
            proxy_buffering off;
        }
    }
}
`;
}

const files: Record<string, string> = {
  'html/one.html': 'foo FOO foo',
  'html/many/page.html': 'foofoo hello HELLO hElLo fo',
  'html/prio/page.html': 'abcd abcx bcdx cdx abcdx',
  'html/once/page.html': 'bbaaaabbaabb',
  'html/vars/page.html': 'one two one Xyz xyz',
  'html/types/page.txt': 'foo',
  'html/types/page.css': 'foo',
  'html/any/page.css': 'foo',
  'html/lm/page.html': 'foo',
  'html/empty.html': '',
  'html/gz/page.html': 'foo bar baz '.repeat(300),
  'html/ssi/page.html': 'foo<!--#include virtual="/ssi/inc.html" -->foo <!--#echo var="arg_a" -->',
  'html/ssi/inc.html': '[part foo]',
};

async function pair(t: TestContext, upstream?: string): Promise<Pair> {
  return startPair(t, { conf: conf(upstream), files });
}

test('replaces case-insensitively, once by default, inherited from http', async (t) => {
  const p = await pair(t);
  const r = await same(t, p, '/one.html');
  assert.equal(r.body.toString(), 'bar FOO foo');
  assert.equal(r.header('content-length'), undefined);
  assert.equal(r.header('last-modified'), undefined);
  assert.equal(r.header('etag'), undefined);
});

test('sub_filter_once off, several strings; the leftmost match wins, then the first configured', async (t) => {
  const p = await pair(t);
  assert.equal((await same(t, p, '/many/page.html')).body.toString(), 'barbar Bye Bye Bye fo');
  assert.equal((await same(t, p, '/prio/page.html')).body.toString(), '1 2x 3dx 4 1x');
});

test('sub_filter_once: each string is replaced once', async (t) => {
  const p = await pair(t);
  assert.equal((await same(t, p, '/once/page.html')).body.toString(), '-+aabbaabb');
});

test('variables in the string and the replacement; an empty string is left out', async (t) => {
  const p = await pair(t);
  assert.equal((await same(t, p, '/vars/page.html?from=ONE&to=1&x=Y')).body.toString(), '<1|/vars/page.html> two <1|/vars/page.html> z z');
  assert.equal((await same(t, p, '/vars/page.html?to=1')).body.toString(), 'one two one yz yz');
});

test('sub_filter_types, *, and responses the filter leaves alone', async (t) => {
  const p = await pair(t);
  assert.equal((await same(t, p, '/types/page.txt')).body.toString(), 'bar');
  assert.equal((await same(t, p, '/types/page.css')).body.toString(), 'foo');
  assert.equal((await same(t, p, '/any/page.css')).body.toString(), 'bar');
  const empty = await same(t, p, '/empty.html');
  assert.equal(empty.header('content-length'), '0');
  const head = await same(t, p, 'HEAD /one.html HTTP/1.1');
  assert.equal(head.body.length, 0);
});

test('sub_filter_last_modified keeps Last-Modified and weakens the ETag', async (t) => {
  const p = await pair(t);
  const r = await same(t, p, '/lm/page.html');
  assert.ok(r.header('last-modified'));
  assert.match(r.header('etag') ?? '', /^W\/"/);
});

test('gzip compresses what the filter produced', async (t) => {
  const p = await pair(t);
  const req = 'GET /gz/page.html HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n';
  const r = await ask(p.gh, req);
  assert.equal(r.header('content-encoding'), 'gzip');
  assert.equal(zlib.gunzipSync(r.body).toString(), 'bar bar baz '.repeat(300));
  if (p.ng) {
    const ref = await ask(p.ng, req);
    // (a gzipped body: the headers compared, the server's name masked)
    const head = (x: typeof r) => maskNameInResponse(x.headers, '').headers.filter(([k]) => k !== 'Date');
    assert.deepEqual(head(r), head(ref));
  }
});

test('with SSI: the page is filtered before SSI runs; an included part is filtered by its own location', async (t) => {
  const p = await pair(t);
  const r = await same(t, p, '/ssi/page.html?a=foo');
  assert.equal(r.body.toString(), 'bar[PART bar]bar foo');
});

test('strings cut by buffer boundaries are found; a partial match at the end is sent as is', async (t) => {
  const body = 'x<!--pattern--><!--patter--><!--pattern-->abcabcabd-abcab<!--patt';
  for (const piece of [1, 2, 3, 7]) {
    const up = await piecewiseUpstream(t, () => body, piece);
    const p = await pair(t, up.address);
    const r = await same(t, p, '/up/page.html');
    assert.equal(r.body.toString(), '[x][P]<!--patter-->[P]abc[A]-abcab<!--patt', `pieces of ${piece}`);
  }
});
