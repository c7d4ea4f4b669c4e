/**
 * Upgraded connections (WebSocket and the like): the usual
 * `map $http_upgrade $connection_upgrade` configuration, a 101 from the
 * upstream turning the client connection into a two-way tunnel, an upstream
 * refusing the upgrade, and proxy_read_timeout closing an idle tunnel.
 * Reference: Debian's nginx on the same configuration (the 101 head, the
 * request head the upstream receives, the bytes through the tunnel).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import type { RunningServer } from '../kit/server.ts';
import { HTTP_COMMON, RawUpstream, startPair } from './upstream-kit.ts';
import type { Pair } from './upstream-kit.ts';
import { maskServerName } from '../kit/server-name.ts';

let up: RawUpstream;
let pair: Pair;
const stops: Array<() => unknown> = [];

before(async () => {
  up = await RawUpstream.start((req, socket) => {
    if (req.uri === '/refuse') {
      socket.end('HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\nrefused', 'latin1');
      return;
    }
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n', 'latin1');
    // after the switch: an uppercase echo (the kit's request parser is done with this socket)
    socket.removeAllListeners('data');
    socket.on('data', (d: Buffer) => socket.write(d.toString('latin1').toUpperCase(), 'latin1'));
  });
  pair = await startPair({ after: (fn) => { stops.push(fn); } }, { conf: `
events {}
http {
${HTTP_COMMON}
    map $http_upgrade $connection_upgrade {
        default upgrade;
        ''      close;
    }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location / {
            proxy_pass http://${up.address};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_read_timeout 1s;
        }
    }
}
` });
});

after(async () => {
  await Promise.all(stops.map((s) => s()));
  await up.close();
});

/** Opens an upgrade request; resolves with the socket and the response head once the head arrived. */
function upgrade(srv: RunningServer, uri: string): Promise<{ sock: net.Socket; head: string; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(srv.port(8080), '127.0.0.1');
    let buf = Buffer.alloc(0);
    const onData = (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      sock.off('data', onData);
      resolve({ sock, head: buf.subarray(0, end + 4).toString('latin1'), rest: buf.subarray(end + 4) });
    };
    sock.on('data', onData);
    sock.on('error', reject);
    sock.write(`GET ${uri} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: k\r\n\r\n`);
  });
}

function readUntil(sock: net.Socket, want: string): Promise<string> {
  return new Promise((resolve) => {
    let got = '';
    const onData = (d: Buffer) => {
      got += d.toString('latin1');
      if (got.includes(want)) { sock.off('data', onData); resolve(got); }
    };
    sock.on('data', onData);
  });
}

const mask = (head: string) => maskServerName(head).replace(/^Date: .*$/m, 'Date: -');

test('101: the client gets the switch and a tunnel in both directions', async () => {
  const heads: string[] = [];
  const sent: string[] = [];
  for (const srv of [pair.gh, pair.ng]) {
    if (!srv) continue;
    const before = up.requests.length;
    const { sock, head } = await upgrade(srv, '/ws');
    heads.push(mask(head));
    sent.push(up.requests[before].head);
    const echoed = readUntil(sock, 'HELLO THROUGH');
    sock.write('hello through');
    assert.match(await echoed, /HELLO THROUGH/);
    const again = readUntil(sock, 'SECOND');
    sock.write('second');
    assert.match(await again, /SECOND/);
    sock.destroy();
  }
  assert.match(heads[0], /^HTTP\/1\.1 101 Switching Protocols\r\nServer: SERVER\/V\r\nDate: -\r\nConnection: upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: x\r\n\r\n$/);
  assert.match(sent[0], /^GET \/ws HTTP\/1\.1\r\nUpgrade: websocket\r\nConnection: upgrade\r\nHost: 127\.0\.0\.1:\d+\r\nSec-WebSocket-Key: k\r\n\r\n$/);
  if (heads.length === 2) {
    assert.equal(heads[0], heads[1], '101 head (gatehouse vs nginx)');
    assert.equal(sent[0], sent[1], 'request head (gatehouse vs nginx)');
  }
});

test('an upstream that does not switch: the client gets its response', async () => {
  for (const srv of [pair.gh, pair.ng]) {
    if (!srv) continue;
    const { sock, head, rest } = await upgrade(srv, '/refuse');
    assert.match(head, /^HTTP\/1\.1 200 OK\r\n/);
    let body = rest.toString('latin1');
    if (body.length < 7) body += await readUntil(sock, 'refused');
    assert.equal(body, 'refused');
    sock.destroy();
  }
});

test('proxy_read_timeout closes an idle tunnel', async () => {
  const { sock } = await upgrade(pair.gh, '/idle');
  await new Promise((res) => sock.on('close', res));
  assert.match(await pair.gh.waitForLog('error.log', /proxying upgraded connection/), /\[error\] .*upstream timed out \(110: Connection timed out\) while proxying upgraded connection/);
});
