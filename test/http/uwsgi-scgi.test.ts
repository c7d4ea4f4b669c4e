/**
 * uwsgi_pass and scgi_pass against small uwsgi and SCGI servers written
 * here, compared with Debian's nginx on the same configuration: the packet
 * each server receives (header, vars, body), CGI-style and HTTP status-line
 * answers, Location without Status, large bodies until close, hidden
 * headers, intercept_errors, a backend that is down.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { startPair } from '../kit/pair.ts';
import type { Pair } from '../kit/pair.ts';
import { freePort } from '../kit/server.ts';
import { both } from './fastcgi-kit.ts';

const CONF_DIR = fileURLToPath(new URL('../../conf/', import.meta.url));

interface Parsed { head: string; vars: string[]; body: Buffer }

/** The uwsgi packet: modifier1, vars size (LE), modifier2, vars; then CONTENT_LENGTH bytes of body. */
function parseUwsgi(b: Buffer): Parsed | undefined {
  if (b.length < 4) return undefined;
  const size = b.readUInt16LE(1);
  if (b.length < 4 + size) return undefined;
  const vars: string[] = [];
  for (let i = 4; i < 4 + size;) {
    const n = b.readUInt16LE(i);
    vars.push(b.toString('latin1', i + 2, i + 2 + n));
    i += 2 + n;
  }
  const body = b.subarray(4 + size);
  if (body.length < Number(varOf(vars, 'CONTENT_LENGTH') || 0)) return undefined;
  return { head: `modifier1=${b[0]} modifier2=${b[3]}`, vars, body };
}

/** The SCGI netstring of NUL-separated names and values, then CONTENT_LENGTH bytes of body. */
function parseScgi(b: Buffer): Parsed | undefined {
  const colon = b.indexOf(0x3a);
  if (colon < 0) return undefined;
  const len = Number(b.toString('latin1', 0, colon));
  if (b.length < colon + 2 + len) return undefined;
  const vars = b.toString('latin1', colon + 1, colon + 1 + len).split('\0').slice(0, -1);
  const body = b.subarray(colon + 2 + len);
  if (body.length < Number(varOf(vars, 'CONTENT_LENGTH'))) return undefined;
  return { head: `netstring ${len}, ends with "${b.toString('latin1', colon + 1 + len, colon + 2 + len)}"`, vars, body };
}

function varOf(vars: string[], name: string): string | undefined {
  for (let i = 0; i < vars.length; i += 2) if (vars[i] === name) return vars[i + 1];
  return undefined;
}

const VOLATILE = new Set(['REMOTE_PORT', 'SERVER_PORT']);

/** The answer for the request's path (the last segment of DOCUMENT_URI or PATH_INFO). */
function answer(p: Parsed): string {
  const uri = varOf(p.vars, 'DOCUMENT_URI') ?? varOf(p.vars, 'PATH_INFO') ?? '';
  const key = uri.replace(/^.*\//, '');
  switch (key) {
    case 'status': return 'Status: 404 Not Found\r\nContent-Type: text/plain\r\nX-A: 1\r\n\r\nnot here\n';
    case 'httpline': return 'HTTP/1.0 201 Created\r\nContent-Length: 3\r\nX-Powered-By: test\r\n\r\nnew';
    case 'location': return 'Location: /elsewhere\r\n\r\n';
    case 'big': return 'Content-Type: text/plain\r\n\r\n' + 'z'.repeat(200_000);
    default: {
      let out = `Content-Type: text/plain\r\nX-Powered-By: test\r\n\r\n${p.head}\n`;
      for (let i = 0; i < p.vars.length; i += 2) if (!VOLATILE.has(p.vars[i])) out += `${p.vars[i]}=${p.vars[i + 1]}\n`;
      return out + 'body=' + p.body.toString('latin1');
    }
  }
}

function backend(parse: (b: Buffer) => Parsed | undefined): net.Server {
  return net.createServer((s) => {
    let buf = Buffer.alloc(0);
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const p = parse(buf);
      if (p) s.end(answer(p), 'latin1');
    });
    s.on('error', () => undefined);
  });
}

const uwsgi = backend(parseUwsgi);
const scgi = backend(parseScgi);
let uwsgiPort = 0;
let scgiPort = 0;

before(async () => {
  await new Promise<void>((r) => uwsgi.listen(0, '127.0.0.1', r));
  await new Promise<void>((r) => scgi.listen(0, '127.0.0.1', r));
  uwsgiPort = (uwsgi.address() as net.AddressInfo).port;
  scgiPort = (scgi.address() as net.AddressInfo).port;
});

after(() => {
  uwsgi.close();
  scgi.close();
});

const conf = (dead: number) => `
events {}
http {
    access_log %%PREFIX%%/access.log;
    client_body_temp_path %%PREFIX%%/client_body_temp;
    uwsgi_temp_path %%PREFIX%%/uwsgi_temp;
    scgi_temp_path %%PREFIX%%/scgi_temp;
    error_page 404 /404.html;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location = /404.html { return 200 "our own 404\\n"; }
        location /u/ {
            include ${CONF_DIR}uwsgi_params;
            uwsgi_param EXTRA "$arg_x" if_not_empty;
            uwsgi_modifier1 5;
            uwsgi_modifier2 9;
            uwsgi_pass uwsgi://127.0.0.1:${uwsgiPort};
        }
        location /u-intercept/ {
            uwsgi_param PATH_INFO $uri;
            uwsgi_intercept_errors on;
            uwsgi_hide_header X-Powered-By;
            uwsgi_pass 127.0.0.1:${uwsgiPort};
        }
        location /s/ {
            include ${CONF_DIR}scgi_params;
            scgi_param EXTRA "$arg_x" if_not_empty;
            scgi_pass 127.0.0.1:${scgiPort};
        }
        location /s-nobuf/ {
            include ${CONF_DIR}scgi_params;
            scgi_buffering off;
            scgi_request_buffering off;
            scgi_pass 127.0.0.1:${scgiPort};
        }
        location /s-dead/ {
            scgi_pass 127.0.0.1:${dead};
        }
    }
}
`;

let pair: Pair;

const get = (uri: string, extra = '') => `GET ${uri} HTTP/1.0\r\nHost: localhost\r\n${extra}\r\n`;
const post = (uri: string, body: string) => `POST ${uri} HTTP/1.0\r\nHost: localhost\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\n\r\n${body}`;

test('uwsgi and scgi backends, as nginx', async (t) => {
  pair = await startPair(t, { conf: conf(await freePort()) });

  await t.test('uwsgi: the packet, its modifiers, vars and body', async () => {
    const r = await both(pair, post('/u/dump?x=1', 'hello'));
    assert.match(r.response, /\r\n\r\nmodifier1=5 modifier2=9\n/);
    assert.match(r.response, /\nPATH_INFO=\/u\/dump\nDOCUMENT_ROOT=/);
    assert.match(r.response, /\nCONTENT_LENGTH=5\n/);
    assert.match(r.response, /\nEXTRA=1\nHTTP_HOST=localhost\n/);
    assert.match(r.response, /\nbody=hello$/);
    assert.doesNotMatch((await both(pair, get('/u/dump'))).response, /EXTRA/);
  });

  await t.test('uwsgi: status line, Status, Location, a large body until close', async () => {
    assert.match((await both(pair, get('/u/httpline'))).response, /^HTTP\/1\.1 201 Created\r\n[^]*Content-Length: 3\r\n[^]*\r\n\r\nnew$/);
    assert.match((await both(pair, get('/u/status'))).response, /^HTTP\/1\.1 404 Not Found\r\n[^]*X-A: 1\r\n[^]*not here\n$/);
    assert.match((await both(pair, get('/u/location'))).response, /^HTTP\/1\.1 302 Moved Temporarily\r\n[^]*Location: \/elsewhere\r\n/);
    const big = await both(pair, get('/u/big'));
    assert.equal(big.response.length - big.response.indexOf('\r\n\r\n') - 4, 200_000);
  });

  await t.test('uwsgi: intercept_errors and hide_header', async () => {
    assert.match((await both(pair, get('/u-intercept/status'))).response, /^HTTP\/1\.1 404 Not Found\r\n[^]*our own 404\n$/);
    assert.doesNotMatch((await both(pair, get('/u-intercept/dump'))).response, /X-Powered-By/);
  });

  await t.test('scgi: the netstring with CONTENT_LENGTH first, params and headers, body', async () => {
    const r = await both(pair, post('/s/dump?x=2', 'abc'));
    assert.match(r.response, /\r\n\r\nnetstring \d+, ends with ","\nCONTENT_LENGTH=3\nREQUEST_METHOD=POST\n/);
    assert.match(r.response, /\nSCGI=1\n/);
    assert.match(r.response, /\nEXTRA=2\nHTTP_HOST=localhost\n/);
    assert.match(r.response, /\nbody=abc$/);
    assert.match((await both(pair, get('/s/dump'))).response, /\nCONTENT_LENGTH=0\n/);
    const chunked = await both(pair, 'POST /s/dump HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n0\r\n\r\n');
    assert.match(chunked.response, /\nCONTENT_LENGTH=3\n[^]*body=xyz/);
  });

  await t.test('scgi: answers, unbuffered both ways, a backend that is down', async () => {
    assert.match((await both(pair, get('/s/status'))).response, /^HTTP\/1\.1 404 Not Found\r\n/);
    assert.match((await both(pair, get('/s/httpline'))).response, /^HTTP\/1\.1 201 Created\r\n/);
    assert.match((await both(pair, post('/s-nobuf/dump', 'streamed'))).response, /\nbody=streamed/);
    const big = await both(pair, get('/s-nobuf/big'));
    assert.equal(big.response.length - big.response.indexOf('\r\n\r\n') - 4, 200_000);
    const dead = await both(pair, get('/s-dead/x'));
    assert.match(dead.response, /^HTTP\/1\.1 502 Bad Gateway\r\n/);
    assert.match(dead.errors[0], /connect\(\) failed \(111: Connection refused\) while connecting to upstream, .*upstream: "scgi:\/\/127\.0\.0\.1:\d+"/);
  });
});
