/**
 * ngx_http_stub_status_module: the page's exact text and figures as a
 * connection is idle, reads a head, and waits for its response; the
 * $connections_* variables; 405 for POST; counts across two workers.
 * The same steps run on Debian's nginx 1.22, which must show the same
 * page.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { freePort, nginxSkip, startGatehouse, startNginx } from '../kit/server.ts';
import { httpGet, rawRequest, parseResponse } from '../kit/client.ts';

const conf = (backend: number, workers: number) => `
worker_processes ${workers};
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        add_header X-Vars "$connections_active $connections_reading $connections_writing $connections_waiting";
        location = /status { stub_status; }
        location = /held { proxy_pass http://127.0.0.1:${backend}; }
    }
}
`;

/** Connects and resolves once the server has accepted (the kernel's accept is enough for counting after a round trip). */
function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => resolve(s));
    s.on('error', reject);
  });
}

async function status(port: number): Promise<string> {
  return (await httpGet(port, '/status')).body.toString();
}

/** Asks until the page shows `want` (connections are counted when the server's loop gets to them). */
async function statusUntil(port: number, want: RegExp): Promise<string> {
  for (let i = 0; ; i++) {
    const page = await status(port);
    if (want.test(page) || i === 200) return page;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

for (const [name, start, skip] of [['gatehouse', startGatehouse, false], ['nginx', startNginx, nginxSkip]] as const) {
  test(`the page through a connection's states (${name})`, { skip }, async (t) => {
    const held: net.Socket[] = [];
    const backend = net.createServer((s) => { held.push(s); s.on('error', () => {}); });
    const bport = await freePort();
    await new Promise<void>((resolve) => backend.listen(bport, '127.0.0.1', resolve));
    t.after(() => { for (const s of held) s.destroy(); backend.close(); });
    const srv = await start({ conf: conf(bport, 1) });
    t.after(() => srv.stop());
    const port = srv.port(8080);

    assert.equal(await status(port),
      'Active connections: 1 \nserver accepts handled requests\n 1 1 1 \nReading: 0 Writing: 1 Waiting: 0 \n');
    const first = await httpGet(port, '/status');
    assert.equal(first.header('content-type'), 'text/plain');
    assert.equal(first.header('x-vars'), '1 0 1 0');

    // an idle connection waits; a partial head reads; a request waiting for its upstream writes
    const idle = await connect(port);
    t.after(() => idle.destroy());
    assert.match(await statusUntil(port, /Waiting: 1/), /^Active connections: 2 \n.*\n 4 4 3 \nReading: 0 Writing: 1 Waiting: 1 \n$/s);
    // nginx counts the request as soon as its first bytes are in
    idle.write('GET /held HTTP/1.0\r\n');
    assert.match(await statusUntil(port, /Reading: 1/), /\n 5 5 5 \nReading: 1 Writing: 1 Waiting: 0 \n$/);
    idle.write('Host: x\r\n\r\n');
    assert.match(await statusUntil(port, /Writing: 2/), /^Active connections: 2 \n.*\n 6 6 6 \nReading: 0 Writing: 2 Waiting: 0 \n$/s);

    const post = parseResponse(await rawRequest(port, 'POST /status HTTP/1.0\r\nHost: x\r\n\r\n'));
    assert.equal(post.status, 405);
    const head = parseResponse(await rawRequest(port, 'HEAD /status HTTP/1.0\r\nHost: x\r\n\r\n'), { head: true });
    assert.equal(head.status, 200);
  });
}

test('figures count every worker\'s connections', async (t) => {
  const srv = await startGatehouse({ conf: conf(1, 2) });
  t.after(() => srv.stop());
  const port = srv.port(8080);
  const idle = await Promise.all([0, 1, 2, 3, 4, 5].map(() => connect(port)));
  t.after(() => { for (const s of idle) s.destroy(); });
  // whichever worker answers, it sees the six idle connections the kernel spread over both
  for (let i = 0; i < 6; i++) assert.match(await statusUntil(port, /Active connections: 7 /), /^Active connections: 7 \n/);
});
