/**
 * proxy_store: which responses end up as files, where, with which rights
 * and time. Reference: Debian's nginx runs the same configuration and must
 * leave the same files.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { parseResponse, rawRequest } from '../kit/client.ts';
import { nginxSkip, startGatehouse, startNginx } from '../kit/server.ts';
import { HTTP_COMMON, RawUpstream } from './upstream-kit.ts';

const LAST_MODIFIED = 'Mon, 28 Sep 1970 06:00:00 GMT';

function upstreamReply(uri: string): string {
  if (uri.includes('missing')) return 'HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope';
  if (uri.includes('chunked')) return 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n';
  return `HTTP/1.1 200 OK\r\nLast-Modified: ${LAST_MODIFIED}\r\nContent-Length: 8\r\nConnection: close\r\n\r\nSEE-THIS`;
}

for (const [server, start, skip] of [['gatehouse', startGatehouse, false], ['nginx', startNginx, nginxSkip]] as const) {
  test(`proxy_store (${server})`, { skip }, async (t) => {
    const up = await RawUpstream.start((req, socket) => { socket.end(upstreamReply(req.uri), 'latin1'); });
    const srv = await start({ conf: `
events {}
http {
${HTTP_COMMON}
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        root %%PREFIX%%/html;
        location /store/ {
            proxy_pass http://${up.address};
            proxy_store on;
            proxy_store_access user:rw group:r;
        }
        location /named/ {
            proxy_pass http://${up.address};
            proxy_store %%PREFIX%%/custom$uri.saved;
        }
        location /unbuffered/ {
            proxy_pass http://${up.address};
            proxy_store on;
            proxy_buffering off;
        }
    }
}
`, files: { 'html/.keep': '' } });
    t.after(async () => { await srv.stop(); await up.close(); });
    const prefix = srv.prefix;
    // nginx's workers run as nobody: the directories it stores under must be open to them
    fs.mkdirSync(path.join(prefix, 'custom'));
    for (const d of ['html', 'custom']) fs.chmodSync(path.join(prefix, d), 0o777);
    const get = async (uri: string, method = 'GET') => parseResponse(await rawRequest(srv.port(8080), `${method} ${uri} HTTP/1.0\r\nHost: localhost\r\n\r\n`));

    await t.test('a 200 response is stored at root + URI, missing directories made, with the access rights and Last-Modified', async () => {
      assert.equal((await get('/store/a/b/page.html')).body.toString(), 'SEE-THIS');
      const file = path.join(prefix, 'html/store/a/b/page.html');
      assert.equal(fs.readFileSync(file, 'latin1'), 'SEE-THIS');
      const st = fs.statSync(file);
      assert.equal(st.mode & 0o777, 0o640);
      assert.equal(fs.statSync(path.dirname(file)).mode & 0o777, 0o750);
      assert.equal(st.mtime.getTime(), Date.parse(LAST_MODIFIED));
    });

    await t.test('a chunked body is stored decoded; a path with variables', async () => {
      assert.equal((await get('/named/chunked')).body.toString(), 'abcdef');
      assert.equal(fs.readFileSync(path.join(prefix, 'custom/named/chunked.saved'), 'latin1'), 'abcdef');
    });

    await t.test('not stored: other statuses, HEAD, unbuffered responses; no temporary file left', async () => {
      assert.equal((await get('/store/missing')).status, 404);
      assert.equal((await get('/store/head', 'HEAD')).status, 200);
      assert.equal((await get('/unbuffered/x')).body.toString(), 'SEE-THIS');
      for (const f of ['html/store/missing', 'html/store/head', 'html/unbuffered/x']) {
        assert.equal(fs.existsSync(path.join(prefix, f)), false, f);
      }
      assert.deepEqual(fs.readdirSync(path.join(prefix, 'proxy_temp')), []);
    });
  });
}
