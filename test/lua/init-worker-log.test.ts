// What init_worker_by_lua logs reaches the error log of the configuration being started, as
// each nginx worker logs it. Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { luaPair, sameLog } from './hooks-kit.ts';

const pair = await luaPair({ after }, `
    init_worker_by_lua_block {
        ngx.log(ngx.ERR, "init worker says ", ngx.md5("hello world"), " ", ngx.escape_uri("a b"))
        ngx.ctx.seen = "kept"
        ngx.log(ngx.ERR, "init worker ctx: ", ngx.ctx.seen)
    }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / { return 200; }
    }
`);

test('ngx.log in init_worker_by_lua: the line, its level and chunk name as OpenResty writes them', async () => {
  const lines = await sameLog(pair, /init worker says/);
  assert.deepEqual(lines, ['[error] [lua] init_worker_by_lua(nginx.conf:7):2: init worker says 5eb63bbbe01eeed093cb22bb8f5acdc3 a%20b, context: init_worker_by_lua*']);
});

test('ngx.ctx in init_worker_by_lua: a table of its own', async () => {
  const lines = await sameLog(pair, /init worker ctx/);
  assert.deepEqual(lines, ['[error] [lua] init_worker_by_lua(nginx.conf:7):4: init worker ctx: kept, context: init_worker_by_lua*']);
});
