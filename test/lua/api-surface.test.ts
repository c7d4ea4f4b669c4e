// What OpenResty code finds in the tables it walks (t/062-count.t counts them, t/018-ndk.t uses
// ndk.set_var): ngx.req's functions and no helpers of ours, a shared dict's methods through its
// __index, ndk.set_var over set-misc's directives, ngx.HTTP_NOT_IMPLEMENTED,
// ngx.req.set_body_file, ngx.req.set_method (t/088-req-method.t), ngx.send_headers (t/018-ndk.t). Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { startPair } from '../kit/pair.ts';
import { ask, LUA_MODULES, same, sameLog } from './hooks-kit.ts';

const pair = await startPair({ after }, {
  files: { 'body.txt': 'from a file\n' },
  conf: `${LUA_MODULES}load_module /usr/lib/nginx/modules/ngx_http_set_misc_module.so;
error_log logs/error.log info;
events {}
http {
    access_log off;
    lua_shared_dict dogs 1m;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location = /req-keys {
            content_by_lua_block {
                local names = {}
                for k in pairs(ngx.req) do
                    if k ~= "socket" then names[#names + 1] = k end
                end
                table.sort(names)
                ngx.say(table.concat(names, " "))
            }
        }
        location = /shdict-methods {
            content_by_lua_block {
                local names = {}
                for k in pairs(ngx.shared.dogs.__index) do names[#names + 1] = k end
                table.sort(names)
                ngx.say(#names, ": ", table.concat(names, " "))
            }
        }
        location = /ndk {
            content_by_lua_block {
                local n = 0
                for _ in pairs(ndk) do n = n + 1 end
                ngx.say(n, " ", ndk.set_var.set_escape_uri(" :"), " ", ndk.set_var.set_unescape_uri("a%20b"))
                ngx.say(ndk.set_var.set_encode_base32("2011.10.13+0000"), " ", ndk.set_var.set_quote_sql_str("it's"))
                ngx.say(ndk.set_var.set_md5(42), " ", require("ndk") == ndk, " ", ngx.HTTP_NOT_IMPLEMENTED)
            }
        }
        location = /ndk-unknown {
            content_by_lua_block { ngx.say(ndk.set_var.set_escape_uri_blah(" :")) }
        }
        location = /ndk-set-by-lua {
            set_by_lua_block $r { return ndk.set_var.set_unescape_uri("a%20b") }
            return 200 "$r\\n";
        }
        location = /send-headers-runs-filters {
            set $seen '';
            content_by_lua_block {
                ngx.send_headers()
                ngx.say("filter saw: ", ngx.var.seen)
            }
            header_filter_by_lua_block { ngx.var.seen = ndk.set_var.set_unescape_uri("a%20b") }
        }
        location = /head-to-get {
            rewrite_by_lua_block { ngx.req.set_method(ngx.HTTP_GET) }
            content_by_lua_block { ngx.say("method: ", ngx.req.get_method()) }
        }
        location = /dav-methods {
            content_by_lua_block {
                for _, m in ipairs({ ngx.HTTP_MKCOL, ngx.HTTP_COPY, ngx.HTTP_MOVE, ngx.HTTP_PROPFIND,
                                     ngx.HTTP_PROPPATCH, ngx.HTTP_LOCK, ngx.HTTP_UNLOCK, ngx.HTTP_TRACE }) do
                    ngx.req.set_method(m)
                    ngx.say(ngx.req.get_method())
                end
            }
        }
        location = /eof-then-work {
            content_by_lua_block {
                ngx.say("early")
                ngx.eof()
                ngx.sleep(0.2)
                ngx.ctx.after = "set after eof"
            }
            log_by_lua_block { ngx.log(ngx.WARN, "log phase sees: ", ngx.ctx.after) }
        }
        location = /from-file {
            access_by_lua_block {
                ngx.req.read_body()
                ngx.req.set_body_file(ngx.config.prefix() .. "body.txt")
            }
            proxy_pass http://127.0.0.1:$server_port/echo-body;
        }
        location = /from-missing-file {
            content_by_lua_block {
                ngx.req.read_body()
                ngx.req.set_body_file("/nonexistent/body.txt")
            }
        }
        location = /echo-body {
            content_by_lua_block {
                ngx.req.read_body()
                ngx.say(ngx.var.http_content_length, " ", ngx.req.get_body_data() or
                  io.open(ngx.req.get_body_file()):read("a"))
            }
        }
    }
}
`,
});

test('ngx.req holds OpenResty\'s functions and nothing of ours', async () => {
  const names = (await same(pair, '/req-keys')).body.trim().split(' ');
  assert.ok(names.includes('set_body_file'));
  assert.ok(!names.some((n) => n.endsWith('_list')), names.join(' '));
});

test('a shared dict\'s methods are its __index, as OpenResty gives them', async () => {
  assert.match((await same(pair, '/shdict-methods')).body, /^22: __index add capacity delete .* ttl\n$/);
});

test('ndk.set_var runs set-misc\'s directives on a value; require "ndk" is the same table', async () => {
  assert.equal((await same(pair, '/ndk')).body,
    "1 %20%3A a b\n68o32c9e64o2sc9j5co30c1g 'it\\'s'\na1d0c6e83f027327d8461063f4ac58a6 true 501\n");
  assert.equal((await same(pair, '/ndk-set-by-lua')).body, 'a b\n');
});

test('ngx.send_headers runs the header filters before it returns', async () => {
  assert.equal((await same(pair, '/send-headers-runs-filters')).body, 'filter saw: a b\n');
});

test('ngx.req.set_method: a HEAD request made GET gets its body; the WebDAV methods are taken', async () => {
  assert.equal((await same(pair, 'HEAD /head-to-get HTTP/1.1')).body, 'method: GET\n');
  assert.equal((await same(pair, 'GET /dav-methods HTTP/1.1')).body, 'MKCOL\nCOPY\nMOVE\nPROPFIND\nPROPPATCH\nLOCK\nUNLOCK\nTRACE\n');
});

test('after ngx.eof the request goes on: its log phase and the connection\'s close wait for the hook', async () => {
  for (const srv of [pair.gh, pair.ng]) {
    if (!srv) continue;
    const got = await ask(srv, '/eof-then-work');
    assert.equal(got.body, 'early\n');
    // the client saw the connection close: the log phase has run by then
    assert.match(srv.readFile('error.log'), /log phase sees: set after eof/);
  }
});

test('an unknown ndk.set_var directive is a 500 with OpenResty\'s error', async () => {
  assert.equal((await same(pair, '/ndk-unknown')).status, 500);
  const lines = await sameLog(pair, /ndk\.set_var: directive/);
  assert.match(lines[0], /ndk\.set_var: directive "set_escape_uri_blah" not found or does not use ndk_set_var_value/);
});

test('ngx.req.set_body_file makes that file the body proxied, with or without a body before', async () => {
  assert.equal((await same(pair, '/from-file')).body, '12 from a file\n\n');
  assert.equal((await same(pair, 'POST /from-file HTTP/1.1', 'Content-Length: 5\r\n', 'hello')).body, '12 from a file\n\n');
  assert.equal((await same(pair, '/from-missing-file')).status, 500);
  const lines = await sameLog(pair, /nonexistent\/body\.txt/);
  assert.match(lines[0], /stat\(\) "\/nonexistent\/body\.txt" failed/);
});
