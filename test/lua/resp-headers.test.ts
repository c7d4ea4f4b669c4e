// ngx.header and ngx.resp.get_headers as a client and error.log see them: a Content-Length that
// is not a number, Content-Type after the first output, the Connection and Transfer-Encoding
// entries OpenResty adds, and the `max` limit. Reference: Debian's nginx 1.22 +
// libnginx-mod-http-lua 0.10.23 on the same configuration.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { luaPair, same, sameLog } from './hooks-kit.ts';

const pair = await luaPair({ after }, String.raw`
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /bad-length { content_by_lua_block { ngx.header.content_length = "ten"; ngx.say("x") } }
        location /type-after-output {
            default_type text/x-ours;
            content_by_lua_block { ngx.print("type: ") ngx.say(ngx.header.content_type) }
        }
        location /keys {
            content_by_lua_block {
                ngx.header.X_One = "1"
                ngx.header.content_type = "a/b"
                local keys = {}
                for k in pairs(ngx.resp.get_headers(nil, true)) do keys[#keys + 1] = k end
                table.sort(keys)
                ngx.say(table.concat(keys, ","))
            }
        }
        location /filters {
            content_by_lua_block { ngx.say("hi") }
            header_filter_by_lua_block {
                local h = ngx.resp.get_headers()
                ngx.log(ngx.ERR, "in header filter: ", h.connection, " ", h["Transfer-Encoding"])
            }
            body_filter_by_lua_block {
                local h = ngx.resp.get_headers()
                if ngx.arg[2] then ngx.log(ngx.ERR, "in body filter: ", h.connection, " ", h.transfer_encoding) end
            }
        }
        location /limit {
            content_by_lua_block {
                for i = 1, tonumber(ngx.var.arg_n) do ngx.header["X-H" .. i] = "v" end
                local h, err = ngx.resp.get_headers(5)
                local n = 0
                for _ in pairs(h) do n = n + 1 end
                ngx.say(n, " ", err)
            }
        }
    }
`);

test('a Content-Length that is not a number: "failed to set header", 500', async () => {
  assert.equal((await same(pair, '/bad-length')).status, 500);
  await sameLog(pair, /content_by_lua\(nginx\.conf:\d+\):1: failed to set header/);
});

test("after the first output ngx.header.content_type reads default_type's", async () => {
  assert.equal((await same(pair, '/type-after-output')).body, 'type: text/x-ours\n');
});

test('get_headers(nil, true): lowercase content-type and connection besides the headers set', async () => {
  assert.equal((await same(pair, '/keys')).body, 'X-One,connection,content-type\n');
});

test('in the filters: connection (the requests here ask to close), transfer-encoding once chunked', async () => {
  await same(pair, '/filters');
  await sameLog(pair, /in header filter: close nil/);
  await sameLog(pair, /in body filter: close chunked/);
});

test("max counts OpenResty's own entries: past it, the result is cut and 'truncated'", async () => {
  assert.equal((await same(pair, '/limit?n=4')).body, '5 nil\n');
  assert.equal((await same(pair, '/limit?n=5')).body, '5 truncated\n');
});
