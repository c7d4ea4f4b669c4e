/**
 * What the client receives from a proxied response: status line, header
 * fields in order (hidden, passed, rewritten), bodies of every framing, and
 * nginx's answers to bad upstream responses (invalid header → 502,
 * duplicate Content-Length, premature close → truncated). Reference:
 * Debian's nginx on the same configuration and upstream bytes; responses
 * are compared with Date values and nginx's version masked.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { parseResponse, rawExchange } from '../kit/client.ts';
import type { RunningServer } from '../kit/server.ts';
import { HTTP_COMMON, RawUpstream, startPair } from './upstream-kit.ts';
import type { Pair } from './upstream-kit.ts';
import { maskServerName } from '../kit/server-name.ts';

/** Upstream responses by request URI (the part after /r/). */
const RESPONSES: Record<string, string | string[]> = {
  plain: 'HTTP/1.1 200 OK\r\nServer: upstream\r\nDate: Mon, 01 Jan 2001 00:00:00 GMT\r\nX-Pad: avoid browser bug\r\n'
    + 'Content-Type: text/plain\r\nETag: "abc"\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nX-Accel-Expires: 10\r\n'
    + 'Content-Length: 2\r\nConnection: close\r\n\r\nok',
  reason: 'HTTP/1.1 200 Fine Thanks\r\nContent-Length: 2\r\n\r\nok',
  lf: 'HTTP/1.1 200 OK\nX-A:   spaced value   \nNoColon\nContent-Length: 2\n\nok',
  close: 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close',
  chunked: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n',
  nocontent: 'HTTP/1.1 204 No Content\r\nX-A: b\r\n\r\n',
  notmod: 'HTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n',
  lastmod: 'HTTP/1.1 200 OK\r\nLast-Modified: Tue, 02 Jan 2001 03:04:05 GMT\r\nContent-Length: 0\r\n\r\n',
  lastmod404: 'HTTP/1.1 404 Not Found\r\nLast-Modified: Tue, 02 Jan 2001 03:04:05 GMT\r\nContent-Length: 0\r\n\r\n',
  redirect: 'HTTP/1.1 302 Found\r\nLocation: http://UPSTREAM/r/next?a=b\r\nRefresh: 5; url=http://UPSTREAM/r/later\r\nContent-Length: 0\r\n\r\n',
  foreign: 'HTTP/1.1 301 Moved\r\nLocation: http://example.com/elsewhere\r\nContent-Length: 0\r\n\r\n',
  relative: 'HTTP/1.1 302 Found\r\nLocation: /r/rel\r\nContent-Length: 0\r\n\r\n',
  invalid: 'HTTP/1.1 200 OK\r\nX-Bad Name: x\r\nContent-Length: 2\r\n\r\nok',
  folded: 'HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok',
  dupcl: 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok',
  badcl: 'HTTP/1.1 200 OK\r\nContent-Length: 2x\r\n\r\nok',
  tecl: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n0\r\n\r\n',
  unknownte: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nok',
  dupexpires: 'HTTP/1.1 200 OK\r\nExpires: foo\r\nExpires: bar\r\nContent-Type: a/b\r\nContent-Type: c/d\r\nContent-Length: 0\r\n\r\n',
  http09: 'just bytes, no status line',
  short: 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345',
  shortchunked: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n',
  badchunked: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n',
  extra: 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA',
  hide: 'HTTP/1.1 200 OK\r\nX-Secret: s\r\nX-Pad: p\r\nServer: up\r\nContent-Length: 0\r\n\r\n',
  accel: 'HTTP/1.1 200 OK\r\nX-Accel-Redirect: /internal/target\r\nX-Other: o\r\nContent-Type: x/y\r\nContent-Length: 4\r\n\r\nbody',
  lm: 'HTTP/1.1 200 OK\r\nLast-Modified: Mon, 28 Sep 1970 06:00:00 GMT\r\nETag: "lm1"\r\nContent-Length: 2\r\n\r\nok',
  accelunsafe: 'HTTP/1.1 200 OK\r\nX-Accel-Redirect: /internal/%2e%2e/secret\r\nContent-Length: 0\r\n\r\n',
  accelescaped: 'HTTP/1.1 200 OK\r\nX-Accel-Redirect: /internal/a%20b?x=1\r\nSet-Cookie: c=1\r\nContent-Length: 0\r\n\r\n',
  cookies: 'HTTP/1.1 200 OK\r\nSet-Cookie: a=1; Domain=.Backend.example; Path=/r/x; HttpOnly\r\n'
    + 'Set-Cookie: b=2; path=/other;  domain=up.example ; SameSite=Lax\r\nSet-Cookie: plain\r\nContent-Length: 0\r\n\r\n',
  toobig: `HTTP/1.1 200 OK\r\nX-Big: ${'x'.repeat(5000)}\r\nContent-Length: 0\r\n\r\n`,
};

let up: RawUpstream;
let pair: Pair;
const stops: Array<() => unknown> = [];

const conf = (u: string) => `
events {}
http {
${HTTP_COMMON}
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        proxy_read_timeout 3s;

        location /r/ { proxy_pass http://${u}/r/; }
        location /v11/ { proxy_pass http://${u}/r/; proxy_http_version 1.1; }
        location /hide/ {
            proxy_pass http://${u}/r/;
            proxy_hide_header X-Secret;
            proxy_pass_header X-Pad;
        }
        location /ignore/ { proxy_pass http://${u}/r/; proxy_ignore_headers X-Accel-Redirect; }
        location /off/ { proxy_pass http://${u}/r/; proxy_redirect off; }
        location /custom/ { proxy_pass http://${u}/r/; proxy_redirect http://example.com/ /ex/; }
        location /regex/ { proxy_pass http://${u}/r/; proxy_redirect ~^http://[^/]+/r/(\\w+)(.*)$ /re/$1$2; }
        location /internal/ { internal; return 200 "internal $uri\\n"; }
        location /internal/a { internal; return 200 "internal $uri args=$args\\n"; }
        location /unbuffered/ { proxy_pass http://${u}/r/; proxy_buffering off; }
        location /cookie/ {
            proxy_pass http://${u}/r/;
            proxy_cookie_domain ~^\\.?([a-z0-9.]+)\\.example$ $1.test;
            proxy_cookie_domain up.example front.example;
            proxy_cookie_path /r/ /cookie/;
            proxy_cookie_flags a secure samesite=strict nohttponly;
            proxy_cookie_flags ~^b$ nosamesite httponly;
        }
    }
}
`;

before(async () => {
  up = await RawUpstream.start((req, socket) => {
    const key = req.uri.replace(/^\/r\//, '').replace(/\?.*$/, '');
    const text = RESPONSES[key] ?? 'HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n';
    socket.end(String(text).replaceAll('UPSTREAM', up.address), 'latin1');
  });
  pair = await startPair({ after: (fn) => { stops.push(fn); } }, { conf: conf(up.address) });
});

after(async () => {
  await Promise.all(stops.map((s) => s()));
  await up.close();
});

/** The response as a client sees it, with what differs between nginx builds masked. */
async function fetchRaw(srv: RunningServer, uri: string, version = '1.1', method = 'GET', extra = ''): Promise<{ text: string; end: string }> {
  const ex = await rawExchange(srv.port(8080), `${method} ${uri} HTTP/${version}\r\nHost: localhost\r\n${extra}Connection: close\r\n\r\n`);
  const text = maskServerName(ex.data.toString('latin1'))
    .replace(/^Date: .*$/gm, 'Date: -')
    .replaceAll(`:${srv.port(8080)}`, ':PORT');
  return { text, end: ex.end };
}

/** Checks Gatehouse against nginx for `uri` and returns Gatehouse's response text. */
async function same(uri: string, version = '1.1', method = 'GET', extra = ''): Promise<string> {
  const gh = await fetchRaw(pair.gh, uri, version, method, extra);
  if (pair.ng) {
    const ng = await fetchRaw(pair.ng, uri, version, method, extra);
    assert.equal(gh.text, ng.text, `response to ${method} ${uri} (gatehouse vs nginx)`);
  }
  return gh.text;
}

test('hidden and passed fields: Server, Date, X-Pad, X-Accel-* dropped; the rest in order', async () => {
  const t = await same('/r/plain');
  assert.match(t, /^HTTP\/1\.1 200 OK\r\nServer: SERVER\/V\r\nDate: -\r\nContent-Type: text\/plain\r\nContent-Length: 2\r\nConnection: close\r\nETag: "abc"\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\nok$/);
});

test('the upstream reason phrase is kept', async () => {
  assert.match(await same('/r/reason'), /^HTTP\/1\.1 200 Fine Thanks\r\n/);
});

test('LF line ends, spaces around values, a line without a colon', async () => {
  assert.match(await same('/r/lf'), /\r\nX-A: spaced value\r\nNoColon: \r\n/);
});

test('bodies: until close (chunked to HTTP/1.1, close-delimited to 1.0), chunked, 204, 304', async () => {
  assert.match(await same('/r/close'), /Transfer-Encoding: chunked\r\n.*\r\n\r\nb\r\nuntil close\r\n0\r\n\r\n$/s);
  assert.match(await same('/r/close', '1.0'), /\r\n\r\nuntil close$/);
  // what one read brought goes to the client as one chunk
  assert.match(await same('/r/chunked'), /\r\n\r\nb\r\nhello world\r\n0\r\n\r\n$/);
  await same('/r/chunked', '1.0');
  await same('/r/nocontent');
  await same('/r/notmod');
  await same('/unbuffered/chunked');
  await same('/r/plain', '1.1', 'HEAD');
});

test('Last-Modified keeps its place among the upstream fields', async () => {
  assert.match(await same('/r/lastmod'), /\r\nConnection: close\r\nLast-Modified: Tue, 02 Jan 2001 03:04:05 GMT\r\n/);
  assert.match(await same('/r/lastmod404'), /\r\nLast-Modified: Tue, 02 Jan 2001 03:04:05 GMT\r\n/);
});

test('proxy_redirect: default, off, custom text, regex', async () => {
  assert.match(await same('/r/redirect'), /\r\nLocation: http:\/\/localhost:PORT\/r\/next\?a=b\r\n/);
  await same('/r/foreign');
  await same('/r/relative');
  assert.match(await same('/off/redirect'), /Location: http:\/\/127\.0\.0\.1/);
  assert.match(await same('/custom/foreign'), /\r\nLocation: http:\/\/localhost:PORT\/ex\/elsewhere\r\n/);
  await same('/regex/redirect');
});

/** Gatehouse alone: where nginx 1.23+ (the version Gatehouse reports, and nginx-tests' proxy_duplicate_headers.t) differs from Debian's 1.22. */
async function gatehouseOnly(uri: string): Promise<string> {
  return (await fetchRaw(pair.gh, uri)).text;
}

test('invalid upstream headers: 502', async () => {
  for (const k of ['invalid', 'folded', 'toobig']) {
    assert.match(await same(`/r/${k}`), /^HTTP\/1\.1 502 Bad Gateway\r\n/, k);
  }
  // nginx 1.23+ (proxy_duplicate_headers.t): a second or bad Content-Length, both framings, an unknown coding
  for (const k of ['dupcl', 'badcl', 'tecl', 'unknownte']) {
    assert.match(await gatehouseOnly(`/r/${k}`), /^HTTP\/1\.1 502 Bad Gateway\r\n/, k);
  }
  const log = pair.gh.logLines().join('\n');
  assert.match(log, /\[error\] .*upstream sent invalid header: "X-Bad\\x20\.\.\." while reading response header from upstream, client: 127\.0\.0\.1, server: localhost, request: "GET \/r\/invalid HTTP\/1\.1", upstream: "http:\/\/127\.0\.0\.1:\d+\/r\/invalid", host: "localhost"/);
  assert.match(log, /upstream sent duplicate header line: "Content-Length: 2", previous value: "Content-Length: 2" while reading response header from upstream/);
  assert.match(log, /upstream sent too big header while reading response header from upstream/);
});

test('a duplicate single-valued field is ignored (nginx 1.23+)', async () => {
  const t = await gatehouseOnly('/r/dupexpires');
  assert.match(t, /Content-Type: a\/b\r\n/);
  assert.doesNotMatch(t, /bar|c\/d/);
});

test('HTTP/0.9 upstream response: relayed as is, without a head', async () => {
  assert.equal(await same('/r/http09', '1.0'), 'just bytes, no status line');
});

test('premature close and bad framing: the client response is cut short', async () => {
  // an invalid chunk in the first read: nginx closes before anything was flushed
  assert.equal(await same('/r/badchunked'), '');
  for (const k of ['short', 'shortchunked']) {
    const gh = await fetchRaw(pair.gh, `/r/${k}`);
    const r = parseResponse(Buffer.from(gh.text, 'latin1'));
    assert.equal(r.status, 200, k);
    assert.equal(r.complete, false, `${k}: the response ends before its body does`);
    if (pair.ng) assert.equal(gh.text, (await fetchRaw(pair.ng, `/r/${k}`)).text, k);
  }
  assert.match(pair.gh.logLines().join('\n'), /upstream prematurely closed connection while reading upstream/);
});

test('more data than Content-Length is cut', async () => {
  assert.match(await same('/r/extra'), /\r\n\r\nok$/);
});

test('proxy_cookie_domain, proxy_cookie_path, proxy_cookie_flags', async () => {
  const t = await same('/cookie/cookies');
  // the first domain rule that matches wins (a regex replaces the whole value); flags edit in place or append
  assert.match(t, /\r\nSet-Cookie: a=1; Domain=Backend\.test; Path=\/cookie\/x; Secure; SameSite=Strict\r\n/);
  assert.match(t, /\r\nSet-Cookie: b=2; path=\/other; domain=up\.test; HttpOnly\r\n/);
  assert.match(t, /\r\nSet-Cookie: plain\r\n/);
});

test('a proxied response that is not cached gets no 304 or 412 (nginx: r->disable_not_modified)', async () => {
  assert.match(await same('/r/lm', '1.1', 'GET', 'If-Modified-Since: Mon, 28 Sep 1970 06:00:00 GMT\r\n'), /^HTTP\/1\.1 200 OK\r\n/);
  assert.match(await same('/r/lm', '1.1', 'GET', 'If-None-Match: "lm1"\r\n'), /^HTTP\/1\.1 200 OK\r\n/);
  assert.match(await same('/r/lm', '1.1', 'GET', 'If-Unmodified-Since: Fri, 05 Jul 1985 14:30:52 GMT\r\n'), /^HTTP\/1\.1 200 OK\r\n.*\r\n\r\nok$/s);
});

test('proxy_hide_header, proxy_pass_header', async () => {
  const t = await same('/hide/hide');
  assert.doesNotMatch(t, /X-Secret/);
  assert.match(t, /\r\nX-Pad: p\r\n/);
});

test('X-Accel-Redirect: internal redirect, unless ignored', async () => {
  assert.match(await gatehouseOnly('/r/accel'), /^HTTP\/1\.1 200 OK\r\n.*\r\n\r\ninternal \/internal\/target\n$/s);
  assert.match(await same('/ignore/accel'), /\r\n\r\nbody$/);
});

test('X-Accel-Redirect: the upstream\'s Content-Type and Set-Cookie kept, %XX decoded, args split off, ".." refused with 404', async () => {
  assert.match(await same('/r/accel'), /\r\nContent-Type: x\/y\r\n/);
  assert.match(await same('/r/accelescaped'), /^HTTP\/1\.1 200 OK\r\n.*Set-Cookie: c=1\r\n\r\ninternal \/internal\/a b args=x=1\n$/s);
  assert.match(await same('/r/accelunsafe'), /^HTTP\/1\.1 404 /);
});
