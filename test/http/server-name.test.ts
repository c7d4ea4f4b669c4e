/**
 * What Gatehouse calls itself: `Server: gatehouse/VERSION` and the same
 * last line on its own pages (`gatehouse` with server_tokens off, `build`
 * as `on`), on HTTP/1.x and HTTP/2; headers-more changes the header only;
 * `$nginx_version` keeps the nginx release Gatehouse follows. And the
 * masking that differential tests use (test/kit/server-name.ts): nginx's
 * answer and Gatehouse's become the same text, lengths included.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { httpGet, rawRequest } from '../kit/client.ts';
import { startGatehouse } from '../kit/server.ts';
import { GATEHOUSE_VER, GATEHOUSE_VERSION, maskNameInResponse, maskServerName } from '../kit/server-name.ts';
import { h2connect, h2request } from '../tls/http2-client.ts';

const conf = `
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /on/ { return 404; }
        location /off/ { server_tokens off; return 502; }
        location /build/ { server_tokens build; return 403; }
        location = /version { return 200 "$nginx_version"; }
        location /set/ { more_set_headers 'Server: elsewhere'; return 404; }
        location /clear/ { more_clear_headers Server; return 200 "no name"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        http2 on;
        location /on/ { return 404; }
        location /off/ { server_tokens off; return 404; }
    }
}
`;

const page = (title: string, sign: string) => `<html>\r\n<head><title>${title}</title></head>\r\n<body>\r\n<center><h1>${title}</h1></center>\r\n`
  + `<hr><center>${sign}</center>\r\n</body>\r\n</html>\r\n`;

test('Gatehouse names itself in Server and on its pages; $nginx_version is the nginx release it follows', async (t) => {
  const srv = await startGatehouse({ conf });
  t.after(() => srv.stop());
  assert.match(GATEHOUSE_VERSION, /^\d+\.\d+\.\d+/);
  const port = srv.port(8080);

  for (const [uri, title, sign] of [['/on/', '404 Not Found', GATEHOUSE_VER], ['/off/', '502 Bad Gateway', 'gatehouse'], ['/build/', '403 Forbidden', GATEHOUSE_VER]]) {
    const r = await httpGet(port, uri);
    assert.equal(r.header('server'), sign, uri);
    assert.equal(r.body.toString('latin1'), page(title, sign), uri);
    assert.equal(r.header('content-length'), String(page(title, sign).length), uri);
  }
  assert.equal((await httpGet(port, '/version')).body.toString(), '1.28.0');

  // headers-more changes the header; the page keeps server_tokens' line, as nginx
  const set = await httpGet(port, '/set/');
  assert.equal(set.header('server'), 'elsewhere');
  assert.equal(set.body.toString('latin1'), page('404 Not Found', GATEHOUSE_VER));
  const cleared = await rawRequest(port, 'GET /clear/ HTTP/1.0\r\n\r\n');
  assert.doesNotMatch(cleared.toString('latin1'), /^Server:/im);

  // HTTP/2: the same header and page
  const session = h2connect(srv.port(8081), 'http');
  t.after(() => session.close());
  const on = await h2request(session, { ':path': '/on/' });
  assert.equal(on.status, 404);
  assert.equal(on.headers.server, GATEHOUSE_VER);
  assert.equal(on.body.toString('latin1'), page('404 Not Found', GATEHOUSE_VER));
  const off = await h2request(session, { ':path': '/off/' });
  assert.equal(off.headers.server, 'gatehouse');
  assert.equal(off.body.toString('latin1'), page('404 Not Found', 'gatehouse'));
});

test('the differential tests\' mask makes nginx\'s and Gatehouse\'s answers one text and nothing else', () => {
  const answer = (sign: string, status = '404 Not Found', head = false) => {
    const body = page(status, sign);
    return `HTTP/1.1 ${status}\r\nServer: ${sign}\r\nContent-Type: text/html\r\nContent-Length: ${body.length}\r\n\r\n${head ? '' : body}`;
  };
  // a GET, a HEAD (no body: its length is that of the page it would have had), another GET on one connection
  const stream = (sign: string) => answer(sign) + answer(sign, '502 Bad Gateway', true) + answer(sign, '400 Bad Request');
  for (const [ours, theirs] of [[GATEHOUSE_VER, 'nginx/1.22.1'], ['gatehouse', 'nginx']]) {
    const masked = maskServerName(stream(ours));
    assert.equal(masked, maskServerName(stream(theirs)));
    assert.doesNotMatch(masked, /gatehouse|nginx/);
    // the lengths are those of the masked pages
    const sign = ours.includes('/') ? 'SERVER/V' : 'SERVER';
    assert.equal(masked, stream(sign));
  }
  // a length that was wrong stays wrong; a body that is not a page of the server's is left as it is
  const wrong = answer(GATEHOUSE_VER).replace(/Content-Length: (\d+)/, (_m, n: string) => `Content-Length: ${Number(n) + 1}`);
  assert.notEqual(maskServerName(wrong), maskServerName(answer('nginx/1.22.1')));
  const other = 'HTTP/1.1 200 OK\r\nServer: gatehouse/0.1.0\r\nContent-Length: 17\r\n\r\nnginx/1.2.3 rules';
  assert.equal(maskServerName(other), 'HTTP/1.1 200 OK\r\nServer: SERVER/V\r\nContent-Length: 17\r\n\r\nnginx/1.2.3 rules');

  const parsed = (sign: string, body: string): Array<[string, string]> => [['Server', sign], ['Content-Length', String(page('404 Not Found', sign).length)], ['X-Body', body]];
  assert.deepEqual(maskNameInResponse(parsed(GATEHOUSE_VER, 'b'), page('404 Not Found', GATEHOUSE_VER)),
    maskNameInResponse(parsed('nginx/1.22.1', 'b'), page('404 Not Found', 'nginx/1.22.1')));
  assert.deepEqual(maskNameInResponse(parsed('gatehouse', 'b'), '', 404), maskNameInResponse(parsed('nginx', 'b'), '', 404));
});
