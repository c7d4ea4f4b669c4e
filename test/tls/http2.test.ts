/**
 * HTTP/2 on TLS listeners: `listen … ssl http2` and `http2 on`, chosen by
 * ALPN, with HTTP/1.1 on the same port; requests go through the same
 * pipeline (variables, error pages, static files). Reference: nginx sends
 * `$request` as `GET / HTTP/2.0` and `$http2` as `h2`.
 */
import { execFileSync } from 'node:child_process';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http2 from 'node:http2';
import os from 'node:os';
import path from 'node:path';
import { startGatehouse } from '../kit/server.ts';
import { rawRequest } from '../kit/client.ts';
import { CertFactory } from './certs.ts';
import { bodyOf, tlsExchange } from './client.ts';
import { GATEHOUSE_VER } from '../kit/server-name.ts';

let certs: CertFactory;

before(() => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-h2-')));
  certs.selfSigned('localhost');
});
after(() => fs.rmSync(certs.dir, { recursive: true, force: true }));

interface H2Response { status: number; headers: http2.IncomingHttpHeaders; body: string }

function h2get(port: number, paths: string[], authority = 'localhost', scheme = 'https'): Promise<H2Response[]> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`${scheme}://127.0.0.1:${port}`, { rejectUnauthorized: false, servername: authority });
    session.on('error', reject);
    // several streams at once on one connection
    Promise.all(paths.map((p) => new Promise<H2Response>((res, rej) => {
      const req = session.request({ ':path': p, ':authority': authority });
      let body = '';
      let headers: http2.IncomingHttpHeaders = {};
      req.setEncoding('latin1');
      req.on('response', (h) => { headers = h; });
      req.on('data', (d: string) => { body += d; });
      req.on('end', () => res({ status: Number(headers[':status']), headers, body }));
      req.on('error', rej);
      req.end();
    }))).then((r) => { session.close(); resolve(r); }, reject);
  });
}

const conf = `
events {}
http {
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl http2;
        server_name localhost;
        ssl_certificate localhost.crt;
        ssl_certificate_key localhost.key;
        location / { return 200 "$request|$http2|$ssl_alpn_protocol|$host|$server_protocol"; }
        location /missing { return 404; }
        location /h { add_header X-Test yes; return 200 "h"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8444%% ssl;
        server_name localhost;
        http2 on;
        ssl_certificate localhost.crt;
        ssl_certificate_key localhost.key;
        location / { return 200 "$http2"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8446%% http2;
        location / { return 200 "$http2:$server_protocol"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8445%% ssl;
        server_name localhost;
        ssl_certificate localhost.crt;
        ssl_certificate_key localhost.key;
        location / { return 200 "$server_protocol"; }
    }
}
`;

test('HTTP/2 by ALPN through the same pipeline, HTTP/1.1 on the same port', async (t) => {
  const srv = await startGatehouse({ conf, files: { 'localhost.crt': certs.read('localhost.crt'), 'localhost.key': certs.read('localhost.key') } });
  t.after(() => srv.stop());
  const [root, missing, withHeader] = await h2get(srv.port(8443), ['/x?a=1', '/missing', '/h']);
  assert.equal(root.status, 200);
  assert.equal(root.body, 'GET /x?a=1 HTTP/2.0|h2|h2|localhost|HTTP/2.0');
  assert.equal(root.headers.server, GATEHOUSE_VER);
  assert.equal(root.headers.connection, undefined);
  assert.equal(missing.status, 404);
  assert.match(missing.body, /<title>404 Not Found<\/title>/);
  assert.equal(withHeader.headers['x-test'], 'yes');

  const h1 = await tlsExchange(srv.port(8443), { ALPNProtocols: ['http/1.1'] });
  assert.equal(h1.alpn, 'http/1.1');
  assert.equal(bodyOf(h1.data), 'GET / HTTP/1.0||http/1.1|localhost|HTTP/1.0');

  // `http2 on` in the server block
  const [on] = await h2get(srv.port(8444), ['/']);
  assert.equal(on.body, 'h2');
  // no http2: ALPN offers only http/1.1
  const plain = await tlsExchange(srv.port(8445), { ALPNProtocols: ['h2', 'http/1.1'] });
  assert.equal(plain.alpn, 'http/1.1');
  assert.equal(bodyOf(plain.data), 'HTTP/1.0');

  // without TLS: HTTP/2 with prior knowledge, and HTTP/1.x on the same port
  const [h2c] = await h2get(srv.port(8446), ['/'], 'localhost', 'http');
  assert.equal(h2c.body, 'h2c:HTTP/2.0');
  assert.equal(bodyOf(await rawRequest(srv.port(8446), 'GET / HTTP/1.0\r\n\r\n')), ':HTTP/1.0');
});

const curl = (() => {
  try {
    return execFileSync('sh', ['-c', 'command -v curl']).toString().trim() || undefined;
  } catch {
    return undefined;
  }
})();

test('TLS variables of an HTTP/2 stream logged after curl dropped the connection', { skip: curl ? false : 'curl is not installed' }, async (t) => {
  // curl closes its connection as soon as the body is in, and the stream is logged after that:
  // $ssl_protocol, $ssl_cipher and $ssl_session_reused must still be there, as in nginx
  // (they were read from the TLS socket, which forgets them once destroyed)
  const srv = await startGatehouse({
    conf: `
events {}
http {
    log_format tls '$server_protocol $ssl_protocol $ssl_cipher $ssl_session_reused $body_bytes_sent';
    ssl_session_cache shared:SSL:1m;
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        http2 on;
        ssl_certificate localhost.crt;
        ssl_certificate_key localhost.key;
        access_log %%PREFIX%%/access.log tls;
        location / { return 200 "hello"; }
    }
}
`,
    files: { 'localhost.crt': certs.read('localhost.crt'), 'localhost.key': certs.read('localhost.key') },
  });
  t.after(() => srv.stop());
  for (let i = 0; i < 8; i++) {
    execFileSync(curl!, ['-sk', '--http2', '-o', '/dev/null', `https://127.0.0.1:${srv.port(8443)}/`]);
  }
  await srv.waitForLog('access.log', /(?:.*\n){8}/);
  const lines = srv.readFile('access.log').trim().split('\n');
  assert.equal(lines.length, 8);
  for (const line of lines) assert.match(line, /^HTTP\/2\.0 TLSv1\.[23] [A-Z0-9_-]+ \. 5$/);
});
