/**
 * An HTTP/2 connection's life as nginx leads it (reference: nginx 1.25+'s
 * `http2 on`, nginx-tests h2_keepalive.t): HTTP/2 with prior knowledge on a
 * plain listener with `http2 on` and HTTP/1.x beside it, GOAWAY after
 * keepalive_requests streams and after keepalive_timeout idle, a client
 * reset logged as nginx does, and a slow reader of an unbuffered proxied
 * response holding the upstream back instead of piling the body up.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { startGatehouse } from '../kit/server.ts';
import { rawRequest } from '../kit/client.ts';
import { h2connect, h2goaway, h2request } from './http2-client.ts';

const conf = (upstream: number) => `
events {}
http {
    access_log %%PREFIX%%/access.log;
    http2 on;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        keepalive_requests 2;
        location / { return 200 "$http2:$server_protocol:$connection_requests"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        keepalive_timeout 300ms;
        root %%PREFIX%%/html;
        location /up { proxy_pass http://127.0.0.1:${upstream}; proxy_buffering off; }
    }
}
`;

test('HTTP/2 connection: prior knowledge with http2 on, GOAWAY by keepalive limits, resets, backpressure', async (t) => {
  // an upstream that writes as fast as it is allowed to, and says how much it got rid of
  let upstreamWritten = 0;
  let upstreamBlocked: () => void = () => undefined;
  const blocked = new Promise<void>((r) => { upstreamBlocked = r; });
  const backend = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-length': String(256 << 20) });
    const chunk = Buffer.alloc(64 * 1024, 'u');
    const pump = () => {
      while (upstreamWritten < 256 << 20) {
        upstreamWritten += chunk.length;
        if (!res.write(chunk)) {
          upstreamBlocked();
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    pump();
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  t.after(() => { backend.closeAllConnections(); backend.close(); });
  const srv = await startGatehouse({ conf: conf((backend.address() as AddressInfo).port), files: { 'html/big': Buffer.alloc(4 << 20, 'b') } });
  t.after(() => srv.stop());

  // prior knowledge on a plain port; streams are the connection's requests; GOAWAY after the second
  const s1 = h2connect(srv.port(8080), 'http');
  const away = h2goaway(s1);
  const [a, b] = await Promise.all([h2request(s1, { ':path': '/' }), h2request(s1, { ':path': '/' })]);
  assert.deepEqual([a.body.toString(), b.body.toString()].sort(), ['h2c:HTTP/2.0:1', 'h2c:HTTP/2.0:2']);
  assert.equal(await away, 3);
  s1.destroy();
  // HTTP/1.x on the same port
  const h1 = (await rawRequest(srv.port(8080), 'GET / HTTP/1.0\r\n\r\n')).toString();
  assert.match(h1, /^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\n:HTTP\/1\.0:1$/);

  // keepalive_timeout: GOAWAY once no stream is open for that long
  const s2 = h2connect(srv.port(8081), 'http');
  const idle = h2goaway(s2);
  const aborted = s2.request({ ':path': '/big' });
  await new Promise<void>((resolve) => {
    let got = 0;
    aborted.on('data', (d: Buffer) => { if ((got += d.length) > 512 * 1024) aborted.close(http2.constants.NGHTTP2_CANCEL); });
    aborted.on('close', () => resolve());
  });
  await srv.waitForLog('error.log', /\[info\] .*client canceled stream 1 while sending response to client/);
  assert.match(await srv.waitForLog('access.log', /GET \/big/), /"GET \/big HTTP\/2\.0" 200 \d+ /);
  const bytes = Number(/"GET \/big HTTP\/2\.0" 200 (\d+) /.exec(srv.readFile('access.log'))![1]);
  // (counted by whole writes: what the stream still held when reset is left out)
  assert.ok(bytes > 0 && bytes < 4 << 20, `body_bytes_sent ${bytes} of an aborted stream`);

  // a reader that takes nothing: the upstream is held back (flow control, then socket buffers)
  const slow = s2.request({ ':path': '/up' });
  slow.pause();
  await blocked;
  await new Promise((r) => setTimeout(r, 300));
  const held = upstreamWritten;
  assert.ok(held < 64 << 20, `upstream wrote ${held} bytes to a client that read none`);
  slow.close(http2.constants.NGHTTP2_CANCEL);
  assert.equal(await idle, 3);
  s2.destroy();
});
