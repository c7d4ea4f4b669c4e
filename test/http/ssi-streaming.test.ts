/**
 * SSI on a body that arrives in pieces (an unbuffered proxied response sent
 * a few bytes at a time): commands, parameters and "<!--" cut anywhere;
 * subrequests running side by side while their bodies come out in page
 * order; large includes; a client that leaves while an include is pending.
 * Compared with Debian's nginx 1.22 on the same upstream.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { RawUpstream } from '../proxy/upstream-kit.ts';
import type { UpstreamRequest } from '../proxy/upstream-kit.ts';
import { ask, errorLines, piecewiseUpstream, same, startPair } from './ssi-kit.ts';
import type { TestContext } from 'node:test';

const ERR = '[an error occurred while processing the directive]';

// nginx loses a "<" or "<!-" right before "<!--#" when a buffer ends between them, so the page has none
const page = 'a<!--#echo var="arg_v" -->b<!-- c --><!-d<x<!--#set var="x" value=\'q\\\'uote\' -->[<!--#echo var="x" -->]'
  + '<!--#if expr="$arg_v = /^(V+)/" -->yes <!--#echo var="1" --><!--#else -->no<!--#endif -->'
  + '<!--#bogus param="1" -->e<!--#include virtual="/local.html" -->f<!--#echo var="arg_v" encoding="url"-->g<!-'
  + '-#echo  var = "arg_v"  -->h<!--';

function conf(upstream: string): string {
  return `
events {}
http {
    server_tokens off;
    access_log off;
    types { text/html html; }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        location / { ssi on; }
        location /up/ {
            ssi on;
            proxy_pass http://${upstream}/;
            proxy_buffering off;
        }
        location /raw/ { proxy_pass http://${upstream}/; }
    }
}
`;
}

const files = {
  'html/local.html': '[local]',
  'html/big.html': '<!--#include virtual="/big.txt" -->|<!--#include virtual="/big.txt" -->',
  'html/order.html': 'A<!--#include virtual="/raw/slow" -->B<!--#include virtual="/raw/fast" -->C',
  'html/pending.html': 'A<!--#include virtual="/raw/hang1" -->B<!--#include virtual="/raw/hang2" -->C<!--#include virtual="/raw/hang3" -->D',
};

for (const piece of [1, 2, 3, 5, 8]) {
  test(`a page cut in pieces of ${piece} byte(s) is parsed as a whole`, async (t) => {
    const up = await piecewiseUpstream(t, () => page, piece);
    const p = await startPair(t, { conf: conf(up.address), files });
    const r = await same(t, p, '/up/page.html?v=VV');
    assert.equal(r.body.toString(), `aVVb<!-- c --><!-d<x[q'uote]yes VV${ERR}e[local]fVVgVVh`);
  });
}

test('subrequests run side by side; their bodies keep the page order', async (t) => {
  let fastArrived: () => void = () => undefined;
  const up = await RawUpstream.start(async (req: UpstreamRequest, socket) => {
    if (req.uri === '/slow') {
      // answers once the next include's request is in (or after 5 s, when includes run one by one)
      const arrived = await Promise.race([
        new Promise<boolean>((resolve) => { fastArrived = () => resolve(true); }),
        new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 5000)),
      ]);
      socket.end(`HTTP/1.1 200 OK\r\nContent-Length: ${arrived ? 8 : 6}\r\n\r\n${arrived ? '[slow+f]' : '[slow]'}`);
      return;
    }
    fastArrived();
    socket.end('HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n[fast]');
  });
  t.after(() => up.close());
  const p = await startPair(t, { conf: conf(up.address), files });
  const r = await same(t, p, '/order.html');
  assert.equal(r.body.toString(), 'A[slow+f]B[fast]C');
});

test('large included files come out whole and in order', async (t) => {
  const big = Buffer.alloc(3 * 1024 * 1024);
  for (let i = 0; i < big.length; i++) big[i] = 0x61 + (i % 26);
  const p = await startPair(t, { conf: conf('127.0.0.1:9'), files: { ...files, 'html/big.txt': big } });
  const r = await ask(p.gh, '/big.html');
  assert.equal(r.body.length, big.length * 2 + 1);
  assert.ok(r.body.subarray(0, big.length).equals(big));
  assert.equal(r.body[big.length], 0x7c);
  assert.ok(r.body.subarray(big.length + 1).equals(big));
});

test('a client that leaves while includes are pending: each one\'s upstream connection closes, the server goes on', { timeout: 30000 }, async (t) => {
  let requests = 0;
  let allThree: () => void = () => undefined;
  const seen = new Promise<void>((resolve) => { allThree = resolve; });
  const closed: Array<Promise<void>> = [];
  const up = await RawUpstream.start((_req, socket) => {
    // the upstream side is half-open: the proxy's FIN shows as 'end'
    closed.push(new Promise((resolve) => { socket.once('end', () => resolve()); socket.once('close', () => resolve()); }));
    if (++requests === 3) allThree();
  });
  t.after(() => up.close());
  const p = await startPair(t, { conf: conf(up.address), files });
  const client = net.connect(p.gh.port(8080), '127.0.0.1');
  client.on('error', () => undefined);
  client.write('GET /pending.html HTTP/1.1\r\nHost: localhost\r\n\r\n');
  await seen;
  client.destroy();
  // the proxy of every include hears of it and closes its upstream connection
  await Promise.all(closed);
  const r = await ask(p.gh, '/local.html');
  assert.equal(r.body.toString(), '[local]');
  assert.deepEqual(errorLines(p.gh, /\[(alert|crit|emerg)\]/), []);
});
