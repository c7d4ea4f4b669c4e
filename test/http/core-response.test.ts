/**
 * The response head and nginx's own pages, byte for byte: status lines
 * (known reasons, and none for other codes), header order, every error page
 * with server_tokens on/off/build, msie_padding for MSIE and Chrome,
 * msie_refresh, HEAD and 204/304 without bodies. Reference test against
 * Debian's nginx.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { same, sharedPair, statusOf } from './core-kit.ts';

const codes = [200, 201, 202, 203, 204, 205, 206, 207, 299, 300, 301, 302, 303, 304, 305, 307, 308, 400, 401, 402, 403, 404,
  405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417, 418, 421, 422, 429, 431, 444, 451, 494, 495, 496, 497, 498, 499,
  500, 501, 502, 503, 504, 505, 506, 507, 508, 599];
const each = (prefix: string, text = '') => codes.map((c) => `location = ${prefix}/${c} { return ${c}${text}; }`).join('\n        ');

const pair = sharedPair({
  conf: `
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        ${each('/code')}
        ${each('/text', ' "text"')}
        location /off { server_tokens off; ${each('/off')} }
        location /build { server_tokens build; ${each('/build')} }
        location /refresh { msie_refresh on; return 302 /target?a="b"; }
        location /nopadding { msie_padding off; return 404; }
        location /headers {
            add_header X-First 1;
            add_header Cache-Control no-store;
            add_header X-Last 2;
            return 301 /elsewhere;
        }
    }
}
`,
});

for (const code of codes) {
  test(`return ${code}`, async () => {
    const answer = await same(pair(), `GET /code/${code} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    if (code === 444 || code === 408 || code === 499) assert.deepEqual(answer, { text: '', end: 'close' });
    else assert.equal(statusOf(answer.text), code >= 494 && code <= 497 ? 400 : code);
  });
}

for (const code of [200, 302, 404, 500, 599]) {
  test(`return ${code} with text`, async () => {
    await same(pair(), `GET /text/${code} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
  });
}

for (const tokens of ['off', 'build']) {
  test(`server_tokens ${tokens}`, async () => {
    for (const code of [200, 404, 494]) {
      const answer = await same(pair(), `GET /${tokens}/${code} HTTP/1.0\r\n\r\n`);
      if (tokens === 'off') assert.match(answer.text, /^HTTP\/1\.1 \d+ [^\r]*\r\nServer: SERVER\r\n/);
    }
  });
}

test('msie_padding for MSIE and Chrome, not for other browsers or HTTP/0.9', async () => {
  const agents = ['Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)', 'Mozilla/5.0 (X11) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36',
    'Mozilla/5.0 (X11; rv:120.0) Gecko/20100101 Firefox/120.0', 'Opera/9.80 (MSIE 6.0)'];
  for (const ua of agents) {
    const answer = await same(pair(), `GET /code/404 HTTP/1.0\r\nUser-Agent: ${ua}\r\n\r\n`);
    assert.equal(answer.text.includes('a padding to disable MSIE and Chrome friendly error page'), /MSIE 6|Chrome/.test(ua) && !ua.startsWith('Opera'));
  }
  await same(pair(), 'GET /nopadding HTTP/1.0\r\nUser-Agent: MSIE 6.0\r\n\r\n');
  await same(pair(), 'GET /code/404\r\n');
});

test('msie_refresh sends MSIE a refresh page instead of the redirect', async () => {
  const msie = await same(pair(), 'GET /refresh HTTP/1.0\r\nUser-Agent: Mozilla/4.0 (compatible; MSIE 8.0)\r\n\r\n');
  assert.match(msie.text, /^HTTP\/1\.1 200 OK\r\n[^]*<meta http-equiv="Refresh" content="0; URL=\/target\?a=%22b%22">/);
  const other = await same(pair(), 'GET /refresh HTTP/1.0\r\n\r\n');
  assert.equal(statusOf(other.text), 302);
});

test('header order: Server, Date, type, length, Location, Connection, then the rest', async () => {
  const answer = await same(pair(), 'GET /headers HTTP/1.0\r\nHost: localhost\r\n\r\n');
  const names = [...answer.text.split('\r\n\r\n')[0].matchAll(/^([\w-]+):/gm)].map((m) => m[1]);
  assert.deepEqual(names, ['Server', 'Date', 'Content-Type', 'Content-Length', 'Location', 'Connection', 'X-First', 'Cache-Control', 'X-Last']);
});

test('HEAD: the head of the GET answer, no body', async () => {
  for (const path of ['/code/404', '/text/200', '/headers']) {
    const answer = await same(pair(), `HEAD ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    assert.match(answer.text, /\r\n\r\n$/);
  }
});
