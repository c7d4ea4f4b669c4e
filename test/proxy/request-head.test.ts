/**
 * What the upstream receives, byte for byte: request line and URI rules,
 * proxy_set_header order and defaults, empty values, inheritance,
 * proxy_http_version, proxy_pass_request_headers/body, proxy_set_body,
 * proxy_method, and how request bodies are forwarded. Reference: Debian's
 * nginx on the same configuration and the same requests — the heads the
 * upstream records from both must be identical.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { parseResponse, rawRequest } from '../kit/client.ts';
import type { RequestPart } from '../kit/client.ts';
import type { RunningServer } from '../kit/server.ts';
import { HTTP_COMMON, RawUpstream, replyWith, response, startPair } from './upstream-kit.ts';
import type { Pair, UpstreamRequest } from './upstream-kit.ts';

let up: RawUpstream;
let pair: Pair;
const stops: Array<() => unknown> = [];

const conf = (u: string) => `
events {}
http {
${HTTP_COMMON}
    proxy_set_header X-Http-Level http;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;

        location / { proxy_pass http://${u}; }
        location /prefix/ { proxy_pass http://${u}/replaced/; }
        location /noslash { proxy_pass http://${u}/other; }
        location ~ ^/regex/(.*)$ { proxy_pass http://${u}; }
        location /set/ {
            proxy_pass http://${u};
            proxy_set_header X-First one;
            proxy_set_header Host $host:8000;
            proxy_set_header X-Empty "";
            proxy_set_header User-Agent "";
            proxy_set_header X-Last "$request_method $uri";
        }
        location /v11/ {
            proxy_pass http://${u};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
        location /noheaders/ { proxy_pass http://${u}; proxy_pass_request_headers off; }
        location /nobody/ { proxy_pass http://${u}; proxy_pass_request_body off; }
        location /setbody/ { proxy_pass http://${u}; proxy_set_body "body of $uri"; }
        location /method/ { proxy_pass http://${u}; proxy_method PUT; }
        location /unbuffered/ {
            proxy_pass http://${u};
            proxy_request_buffering off;
            proxy_http_version 1.1;
        }
        location /unbuffered10/ { proxy_pass http://${u}; proxy_request_buffering off; }
        location /rewritten/ {
            rewrite ^/rewritten/(.*)$ /new/$1 break;
            proxy_pass http://${u}/ignored/;
        }
    }
}
`;

before(async () => {
  up = await RawUpstream.start(replyWith(response('ok')));
  up.headOnly = (head) => head.startsWith('POST /nobody/');
  pair = await startPair({ after: (fn) => { stops.push(fn); } }, { conf: conf(up.address) });
});

after(async () => {
  await Promise.all(stops.map((s) => s()));
  await up.close();
});

/** Sends `raw` to a server and returns what the upstream got for it, and the client's response status. */
async function through(srv: RunningServer, raw: RequestPart[]): Promise<{ got: UpstreamRequest | undefined; status: number }> {
  const before = up.requests.length;
  const res = parseResponse(await rawRequest(srv.port(8080), raw));
  return { got: up.requests[before], status: res.status };
}

/** Sends `raw` through Gatehouse (and nginx) and checks the upstream saw the same bytes from both. */
async function same(raw: string | RequestPart[]): Promise<UpstreamRequest> {
  if (!Array.isArray(raw)) raw = [raw];
  const gh = await through(pair.gh, raw);
  assert.ok(gh.got, 'the upstream got a request from gatehouse');
  if (pair.ng) {
    const ng = await through(pair.ng, raw);
    assert.ok(ng.got, 'the upstream got a request from nginx');
    assert.equal(gh.got.head, ng.got.head, 'request head (gatehouse vs nginx)');
    assert.equal(gh.got.rawBody.toString('latin1'), ng.got.rawBody.toString('latin1'), 'request body');
    assert.equal(gh.status, ng.status, 'status to the client');
  }
  return gh.got;
}

const get = (uri: string, extra = '') => `GET ${uri} HTTP/1.1\r\nHost: localhost\r\n${extra}Connection: close\r\n\r\n`;

test('default fields: Host $proxy_host and Connection close first, client fields after, hop-by-hop dropped', async () => {
  const got = await same(get('/a/b?x=1&y', 'User-Agent: test\r\nX_Under: dropped\r\nKeep-Alive: 300\r\nTE: trailers\r\nUpgrade: foo\r\nAccept: */*\r\n'));
  assert.equal(got.head, `GET /a/b?x=1&y HTTP/1.0\r\nX-Http-Level: http\r\nHost: ${up.address}\r\nConnection: close\r\nUser-Agent: test\r\nAccept: */*\r\n\r\n`);
});

test('URI: the location prefix is replaced by the proxy_pass URI', async () => {
  assert.equal((await same(get('/prefix/x/y?q'))).uri, '/replaced/x/y?q');
  assert.equal((await same(get('/noslash/z'))).uri, '/other/z');
  assert.equal((await same(get('/prefix/a%20b'))).uri, '/replaced/a%20b');
});

test('URI: without a URI part the request URI goes as received', async () => {
  assert.equal((await same(get('/a/%7e/../b?x'))).uri, '/a/%7e/../b?x');
  assert.equal((await same(get('/regex/a//b'))).uri, '/regex/a//b');
});

test('URI: after rewrite ... break the rewritten URI goes as is', async () => {
  assert.equal((await same(get('/rewritten/a%20b?q=1'))).uri, '/new/a%20b?q=1');
});

test('proxy_set_header: own lines first in order, then the defaults; empty values not sent; no inheritance', async () => {
  const got = await same(get('/set/x', 'User-Agent: dropped\r\nX-Client: kept\r\n'));
  assert.match(got.head, /^GET \/set\/x HTTP\/1\.0\r\nX-First: one\r\nHost: localhost:8000\r\nX-Last: GET \/set\/x\r\nConnection: close\r\nX-Client: kept\r\n\r\n$/);
});

test('proxy_http_version 1.1 with Connection "" (a level with its own proxy_set_header inherits none)', async () => {
  const got = await same(get('/v11/'));
  assert.equal(got.head, `GET /v11/ HTTP/1.1\r\nHost: ${up.address}\r\n\r\n`);
});

test('request body with Content-Length', async () => {
  const got = await same('POST /body HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello');
  assert.match(got.head, /\r\nContent-Length: 5\r\n/);
  assert.equal(got.body.toString(), 'hello');
});

test('chunked request body: buffered, sent with Content-Length', async () => {
  const got = await same('POST /chunked HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n');
  assert.match(got.head, /\r\nContent-Length: 5\r\n/);
  assert.doesNotMatch(got.head, /Transfer-Encoding/i);
  assert.equal(got.body.toString(), 'abcde');
});

test('proxy_request_buffering off: a chunked body that is still arriving streams chunked to an HTTP/1.1 upstream', async () => {
  const got = await same(['POST /unbuffered/ HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n',
    { delayMs: 200 }, '3\r\nabc\r\n', { delayMs: 50 }, '2\r\nde\r\n0\r\n\r\n']);
  assert.match(got.head, /\r\nTransfer-Encoding: chunked\r\n/);
  assert.equal(got.body.toString(), 'abcde');
});

test('proxy_request_buffering off: a chunked body that arrived with the head goes with Content-Length', async () => {
  const got = await same('POST /unbuffered/ HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n');
  assert.match(got.head, /\r\nContent-Length: 5\r\n/);
  assert.equal(got.body.toString(), 'abcde');
});

test('proxy_request_buffering off with HTTP/1.0: a chunked body is buffered', async () => {
  const got = await same('POST /unbuffered10/ HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n');
  assert.match(got.head, /\r\nContent-Length: 3\r\n/);
  assert.equal(got.body.toString(), 'abc');
});

test('proxy_pass_request_headers off and proxy_pass_request_body off', async () => {
  const h = await same('POST /noheaders/ HTTP/1.1\r\nHost: localhost\r\nX-Foo: bar\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc');
  assert.doesNotMatch(h.head, /X-Foo/);
  assert.equal(h.body.toString(), 'abc');
  const b = await same('POST /nobody/ HTTP/1.1\r\nHost: localhost\r\nX-Foo: bar\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc');
  assert.match(b.head, /X-Foo: bar/);
});

test('proxy_set_body and proxy_method', async () => {
  const s = await same('POST /setbody/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc');
  assert.match(s.head, /\r\nContent-Length: 18\r\n/);
  assert.equal(s.body.toString(), 'body of /setbody/x');
  const m = await same(get('/method/'));
  assert.equal(m.method, 'PUT');
});
