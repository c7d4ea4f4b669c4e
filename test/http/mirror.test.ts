/**
 * ngx_http_mirror_module: a mirror gets the request's method, arguments and
 * body; the client has its whole response while a mirror is still waiting
 * for its backend, but the request ends (connection closed, access log
 * line) only after the mirror does; `mirror off` and several mirrors. The same checks run on Debian's nginx 1.22.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { freePort, nginxSkip, startGatehouse, startNginx } from '../kit/server.ts';
import { parseResponse, rawRequest } from '../kit/client.ts';

/** A backend that records each request's head and body and answers only when told. */
class HeldBackend {
  readonly requests: string[] = [];
  private readonly held: net.Socket[] = [];
  private readonly waiters: Array<() => void> = [];
  readonly server = net.createServer((s) => {
    let data = '';
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      data += d;
      const end = data.indexOf('\r\n\r\n');
      if (end < 0) return;
      const len = Number(/content-length: *(\d+)/i.exec(data.slice(0, end))?.[1] ?? 0);
      if (data.length < end + 4 + len) return;
      this.requests.push(data);
      this.held.push(s);
      for (const w of this.waiters.splice(0)) w();
    });
    s.on('error', () => {});
  });

  /** Resolves once `n` requests arrived. */
  async arrived(n: number): Promise<void> {
    while (this.requests.length < n) await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  release(): void {
    for (const s of this.held.splice(0)) s.end('HTTP/1.0 204 No Content\r\n\r\n');
  }
}

const conf = (backend: number) => `
events {}
http {
    log_format main "$request_uri $status";
    access_log %%PREFIX%%/access.log main;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        # the content comes from another server: a static file refuses POST
        location / {
            mirror /mirror;
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
            location /off { mirror off; proxy_pass http://127.0.0.1:%%PORT_8081%%; }
        }
        location /two {
            mirror /mirror;
            mirror /mirror;
            proxy_pass http://127.0.0.1:%%PORT_8081%%;
        }
        location = /mirror {
            internal;
            proxy_pass http://127.0.0.1:${backend}/copy;
            proxy_set_header Content-Length "";
        }
    }
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        access_log off;
        location / { return 200 "$uri\\n"; }
    }
}
`;

for (const [name, start, skip] of [['gatehouse', startGatehouse, false], ['nginx', startNginx, nginxSkip]] as const) {
  test(`the response goes out at once; the request ends with its mirror (${name})`, { skip }, async (t) => {
    const backend = new HeldBackend();
    const port = await freePort();
    await new Promise<void>((resolve) => backend.server.listen(port, '127.0.0.1', resolve));
    t.after(() => backend.server.close());
    const srv = await start({ conf: conf(port) });
    t.after(() => srv.stop());

    let closed = false;
    const sock = net.connect(srv.port(8080), '127.0.0.1');
    let got = Buffer.alloc(0);
    const complete = new Promise<void>((resolve) => {
      sock.on('data', (d) => {
        got = Buffer.concat([got, d]);
        if (got.includes('\r\n\r\n/page\n')) resolve();
      });
    });
    const gone = new Promise<void>((resolve) => sock.on('close', () => { closed = true; resolve(); }));
   
    sock.write('POST /page?a=1 HTTP/1.0\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello');
    await complete;
    await backend.arrived(1);
    assert.match(backend.requests[0], /^POST \/copy\?a=1 HTTP\/1\.0\r\n/);
    assert.ok(backend.requests[0].endsWith('\r\n\r\nhello'), 'the mirror has the body');
    assert.equal(closed, false, 'the connection stays open while the mirror runs');
    assert.equal(srv.readFile('access.log'), '', 'not logged yet');
    backend.release();
    await gone;
    await srv.waitForLog('access.log', /^\/page\?a=1 200$/m, 10_000);
    assert.equal(parseResponse(got).status, 200);

    // mirror off: nothing reaches the backend; two mirrors: two requests
    assert.equal(parseResponse(await rawRequest(srv.port(8080), 'GET /off HTTP/1.0\r\nHost: x\r\n\r\n')).body.toString(), '/off\n');
    const two = rawRequest(srv.port(8080), 'GET /two HTTP/1.0\r\nHost: x\r\n\r\n');
    await backend.arrived(3);
    backend.release();
    assert.equal(parseResponse(await two).body.toString(), '/two\n');
    assert.ok(backend.requests.slice(1).every((r) => r.startsWith('GET /copy HTTP/1.0\r\n')));
  });
}
