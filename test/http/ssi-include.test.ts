/**
 * SSI `include`: subrequests for static files, relative paths, arguments,
 * nesting and its limit, error statuses and error_page inside a subrequest,
 * locations a subrequest may reach (access checks are skipped, `internal`
 * is allowed), proxied includes and SSI in proxied responses, set=, wait=,
 * file=, gzip of the whole page, variables shared with the parent, and the
 * `subrequest:` part of log lines. Compared with Debian's nginx 1.22.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import { KeepAliveClient, rawRequest } from '../kit/client.ts';
import { RawUpstream } from '../proxy/upstream-kit.ts';
import { ask, errorLines, same, startPair } from './ssi-kit.ts';
import type { Pair } from './ssi-kit.ts';
import type { TestContext } from 'node:test';
import { maskNameInResponse } from '../kit/server-name.ts';

const conf = `
events {}
http {
    server_tokens off;
    access_log off;
    types { text/html html; text/plain txt; }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        location / { ssi on; }
        location /private/ { ssi on; deny all; }
        location /internal/ { internal; }
        location /proxy/ { ssi on; proxy_pass http://127.0.0.1:%%PORT_8081%%/; }
        location /backend/ { proxy_pass http://127.0.0.1:%%PORT_8081%%/; }
        location /gz/ { ssi on; gzip on; gzip_min_length 1; }
        location /vars/ { ssi on; set $mine "from parent"; }
        location /return/ { return 200 "returned $uri?$args"; }
        location /redirect/ { return 302 /elsewhere; }
        location /errpage/ { error_page 404 /fallback.html; }
        location /rewrite/ { rewrite ^/rewrite/(.*)$ /$1 last; }
        location /small/ { ssi on; subrequest_output_buffer_size 8; }
        location /argret/ { return 200 "[$arg_x]"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        server_name backend;
        root %%PREFIX%%/backend;
    }
}
`;

const files: Record<string, string> = {
  'html/page.html': 'A<!--#include virtual="/part.html" -->B<!--#include virtual="sub/rel.html" -->C<!--#include virtual="/missing.html" -->D',
  'html/part.html': '[part]',
  'html/sub/rel.html': '[rel <!--#include virtual="deeper.html" -->]',
  'html/sub/deeper.html': '[deeper]',
  'html/args.html': '<!--#include virtual="/show.html?x=$arg_a&y=2" -->',
  'html/show.html': '[<!--#echo var="args" -->|<!--#echo var="arg_x" -->|<!--#echo var="uri" -->|<!--#echo var="request_uri" -->|<!--#echo var="request_method" -->]',
  'html/nest.html': '1<!--#include virtual="/nest2.html" -->1',
  'html/nest2.html': '2<!--#include virtual="/nest3.html?deep" -->2',
  'html/nest3.html': '3<!--#echo var="args" -->3',
  'html/loop.html': 'x<!--#include virtual="/loop.html" -->',
  'html/where.html': '<!--#include virtual="/private/secret.html" -->|<!--#include virtual="/internal/in.html" -->'
    + '|<!--#include virtual="/return/r?a=1" -->|<!--#include virtual="/errpage/none.html" -->|<!--#include virtual="/rewrite/part.html" -->',
  'html/private/secret.html': 'secret',
  'html/internal/in.html': 'internal',
  'html/fallback.html': 'fallback',
  'html/redir.html': '<!--#include virtual="/redirect/x" -->',
  'html/proxied.html': '<!--#include virtual="/backend/data.txt" set="v" -->[<!--#echo var="v" -->]'
    + '<!--#include virtual="/backend/nothere" -->|<!--#include virtual="/backend/data.txt" -->',
  'backend/data.txt': 'from backend',
  'backend/page.html': 'up<!--#include virtual="/part.html" -->up<!--#echo var="uri" -->',
  'html/waits.html': '<!--#include virtual="/set1.html" wait="yes" -->[<!--#echo var="s" -->]<!--#include file="/set2.html" -->[<!--#echo var="s" -->]',
  'html/set1.html': '<!--#set var="s" value="one" -->',
  'html/set2.html': '<!--#set var="s" value="two" -->',
  'html/gz/page.html': 'gz<!--#include virtual="/part.html" -->'.repeat(50),
  'html/vars/page.html': '<!--#include virtual="/mine.html" -->',
  'html/args2.html': '<!--#include virtual="/argret/?x=1" --><!--#include virtual="/argret/?x=2" wait="yes" --><!--#include virtual="/argret/?x=3" -->',
  'html/mine.html': '[<!--#echo var="mine" -->]',
  'html/big-set.html': '<!--#include virtual="/small/part.html" set="v" -->after',
  'html/small/part.html': 'more than eight bytes',
};

async function pair(t: TestContext): Promise<Pair> {
  return startPair(t, { conf, files });
}

test('includes: absolute and relative paths, nesting, a missing file gives its 404 page', async (t) => {
  const p = await pair(t);
  const r = await same(t, p, '/page.html');
  const body = r.body.toString();
  assert.ok(body.startsWith('A[part]B[rel [deeper]]C<html>\r\n<head><title>404 Not Found</title></head>'), body);
  assert.ok(body.endsWith('</html>\r\nD'));
  assert.equal((await same(t, p, '/nest.html')).body.toString(), '123deep321');
  // the 404 is logged with the subrequest's URI
  const line = errorLines(p.gh, /missing\.html" failed/)[0] ?? '';
  assert.match(line, /request: "GET \/page\.html HTTP\/1\.1", subrequest: "\/missing\.html", host: "localhost"$/);
});

test('a subrequest has its own URI and arguments, the parent\'s $request_uri, and method GET', async (t) => {
  const p = await pair(t);
  const r = await same(t, p, 'POST /args.html?a=Q HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
  assert.equal(r.status, 405);
  const g = await same(t, p, '/args.html?a=Q');
  assert.equal(g.body.toString(), '[x=Q&amp;y=2|Q|/show.html|/args.html?a=Q|GET]');
});

test('subrequests nest 50 deep, then nginx\'s "subrequests cycle"', async (t) => {
  const p = await pair(t);
  const r = await same(t, p, '/loop.html');
  // the page and 51 levels below it
  assert.equal(r.body.toString(), 'x'.repeat(52) + '[an error occurred while processing the directive]');
  assert.equal(errorLines(p.gh, /\[error\].*subrequests cycle while processing "\/loop\.html"/).length, 1);
});

test('locations: no access checks, internal allowed, return, error_page and rewrite inside the subrequest', async (t) => {
  const p = await pair(t);
  assert.equal((await same(t, p, '/private/secret.html')).status, 403);
  assert.equal((await same(t, p, '/internal/in.html')).status, 404);
  const r = await same(t, p, '/where.html');
  assert.equal(r.body.toString(), 'secret|internal|returned /return/r?a=1|fallback|[part]');
  const redir = (await same(t, p, '/redir.html')).body.toString();
  assert.match(redir, /<title>302 Found<\/title>/);
});

test('proxied includes (set= and placed) and SSI in a proxied response', async (t) => {
  const p = await pair(t);
  const r = await same(t, p, '/proxied.html');
  const body = r.body.toString();
  assert.ok(body.startsWith('[from backend]<html>'), body);
  assert.ok(body.endsWith('</html>\r\n|from backend'));
  const up = await same(t, p, '/proxy/page.html');
  assert.equal(up.body.toString(), 'up[part]up/proxy/page.html');
  assert.equal(up.header('last-modified'), undefined);
});

test('wait=yes and file= finish before the page goes on', async (t) => {
  const p = await pair(t);
  assert.equal((await same(t, p, '/waits.html')).body.toString(), '[one][two]');
});

test('gzip compresses the whole page, included parts too', async (t) => {
  const p = await pair(t);
  const req = 'GET /gz/page.html HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n';
  const mine = await ask(p.gh, req);
  assert.equal(mine.header('content-encoding'), 'gzip');
  assert.equal(zlib.gunzipSync(mine.body).toString(), 'gz[part]'.repeat(50));
  if (p.ng) {
    const ref = await ask(p.ng, req);
    // (a gzipped body: the headers compared, the server's name masked)
    const head = (r: typeof mine) => maskNameInResponse(r.headers, '').headers.filter(([k]) => k !== 'Date');
    assert.deepEqual(head(mine), head(ref));
  }
});

test('a subrequest sees the parent\'s variables (nginx shares them), but its own $arg_*', async (t) => {
  const p = await pair(t);
  assert.equal((await same(t, p, '/vars/page.html')).body.toString(), '[from parent]');
  assert.equal((await same(t, p, '/args2.html?x=0')).body.toString(), '[1][2][3]');
});

test('set= with a body over subrequest_output_buffer_size (of the location answering) ends the request', async (t) => {
  const p = await pair(t);
  const req = 'GET /big-set.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n';
  // nothing was sent yet: the connection closes without a response
  assert.equal((await rawRequest(p.gh.port(8080), req)).length, 0);
  assert.equal(errorLines(p.gh, /\[error\].*too big subrequest response/).length, 1);
  if (p.ng) assert.equal((await rawRequest(p.ng.port(8080), req)).length, 0);
});

test('a proxied subrequest sends the client request\'s body, as nginx does', async (t) => {
  const seen: Record<string, string[]> = { gatehouse: [], nginx: [] };
  let current = 'gatehouse';
  const up = await RawUpstream.start((req, socket) => {
    seen[current].push(`${req.method} ${req.uri} ${req.headers.find(([k]) => k.toLowerCase() === 'content-length')?.[1]} ${req.body.toString()}`);
    const body = req.uri.endsWith('page.html') ? 'X<!--#include virtual="part.html" -->X' : 'YY';
    socket.end(`HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  });
  t.after(() => up.close());
  const upConf = `
events {}
http {
    access_log off;
    client_body_temp_path %%PREFIX%%/client_body_temp;
    proxy_temp_path %%PREFIX%%/proxy_temp;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /proxy/ { ssi on; proxy_pass http://${up.address}/; }
    }
}
`;
  const p = await startPair(t, { conf: upConf });
  const req = 'POST /proxy/page.html HTTP/1.0\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n1234567890';
  for (const [name, srv] of [['gatehouse', p.gh], ['nginx', p.ng]] as const) {
    if (!srv) continue;
    current = name;
    assert.equal((await ask(srv, req)).body.toString(), 'XYYX');
  }
  assert.deepEqual(seen.gatehouse, ['POST /page.html 10 1234567890', 'GET /part.html 10 1234567890']);
  if (p.ng) assert.deepEqual(seen.gatehouse, seen.nginx);
});

test('pages with includes on one keepalive connection, pipelined too', async (t) => {
  const p = await pair(t);
  for (const srv of [p.gh, p.ng]) {
    if (!srv) continue;
    const c = await KeepAliveClient.connect(srv.port(8080));
    t.after(() => c.close());
    const get = (uri: string) => `GET ${uri} HTTP/1.1\r\nHost: localhost\r\n\r\n`;
    await c.send(get('/nest.html'));
    const first = await c.readResponse();
    assert.equal(first.body.toString(), '123deep321');
    assert.equal(first.header('connection'), 'keep-alive');
    await c.send(get('/page.html') + get('/waits.html'));
    assert.match((await c.readResponse()).body.toString(), /^A\[part\]B\[rel \[deeper\]\]C<html>/);
    assert.equal((await c.readResponse()).body.toString(), '[one][two]');
  }
});
