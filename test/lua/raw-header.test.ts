// ngx.req.raw_header(): the head's bytes as the client sent them (line ends, spacing, header
// order), untouched by ngx.req.set_header. Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { luaPair, seen } from './hooks-kit.ts';
import { rawRequest } from '../kit/client.ts';
import type { Pair } from '../kit/pair.ts';

const pair: Pair = await luaPair({ after }, `
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /raw {
            content_by_lua_block {
                ngx.req.set_header("X-Added", "1")
                ngx.req.clear_header("X-Gone")
                ngx.print("[", ngx.req.raw_header(), "][", ngx.req.raw_header(true), "]")
            }
        }
    }
`);

async function both(request: string): Promise<string> {
  const gh = seen(await rawRequest(pair.gh.port(8080), request));
  if (pair.ng) assert.deepEqual(gh, seen(await rawRequest(pair.ng.port(8080), request)));
  assert.equal(gh.status, 200);
  return gh.body;
}

test('LF-only line ends and spacing come back as sent', async () => {
  const head = 'GET /raw HTTP/1.1\nHost: localhost\nX-Gone:   spaced\nConnection: close\n\n';
  assert.equal(await both(head), `[${head}][${head.slice(head.indexOf('\n') + 1)}]`);
});

test('CRLF heads, header order and case as sent, not the headers as changed', async () => {
  const head = 'GET /raw?a=1 HTTP/1.1\r\nhost: localhost\r\nX-B: 2\r\nX-A: 1\r\nConnection: close\r\n\r\n';
  assert.equal(await both(head), `[${head}][${head.slice(head.indexOf('\n') + 1)}]`);
});
