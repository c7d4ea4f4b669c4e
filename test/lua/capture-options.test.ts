// ngx.location.capture's request options: `body` (with the method it goes with), `vars`,
// `copy_all_vars`, `share_all_vars`, `always_forward_body`, captures nested in captures, and the
// errors of bad options. Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23 on the same
// config (echo for the inner locations, as OpenResty's own tests use it).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { luaPair, same, sameLog } from './hooks-kit.ts';

const ECHO = 'load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;\n';

const pair = await luaPair({ after }, `
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /show {
            echo "$echo_request_method [$http_content_length]";
            echo_read_request_body;
            echo_request_body;
        }
        location /proxied { proxy_pass http://127.0.0.1:%%PORT_8080%%/show; }
        location /body {
            content_by_lua_block {
                local put = ngx.location.capture("/show", { method = ngx.HTTP_PUT, body = "one" })
                local post = ngx.location.capture("/proxied", { method = ngx.HTTP_POST, body = 12345 })
                local plain = ngx.location.capture("/show")
                ngx.print(put.body, "|", post.body, "|", plain.body)
            }
        }
        location /forward {
            content_by_lua_block {
                ngx.req.read_body()
                local get = ngx.location.capture("/show")
                local always = ngx.location.capture("/show", { always_forward_body = true })
                local put = ngx.location.capture("/show", { method = ngx.HTTP_PUT })
                ngx.print(get.body, "|", always.body, "|", put.body)
            }
        }
        location /vars/show {
            set $pet "$pet!";
            echo "pet=$pet args=$args";
        }
        location /vars {
            set $pet "cat";
            content_by_lua_block {
                local own = ngx.location.capture("/vars/show")
                local given = ngx.location.capture("/vars/show", { vars = { pet = "dog", args = "a=1" } })
                local copied = ngx.location.capture("/vars/show", { copy_all_vars = true })
                ngx.print(own.body, given.body, copied.body, "parent ", ngx.var.pet, "\\n")
                local shared = ngx.location.capture("/vars/show", { share_all_vars = true })
                ngx.print(shared.body, "parent ", ngx.var.pet, "\\n")
            }
        }
        location /undefined {
            content_by_lua_block { ngx.location.capture("/vars/show", { vars = { nosuch = "x" } }) }
        }
        location /fixed {
            content_by_lua_block { ngx.location.capture("/vars/show", { vars = { query_string = "x" } }) }
        }
        location /bad {
            content_by_lua_block {
                for _, opts in ipairs({ { vars = "x" }, { vars = { pet = true } }, { body = {} },
                                        { method = "GET" }, { copy_all_vars = 1 }, { args = true } }) do
                    local ok, err = pcall(ngx.location.capture, "/vars/show", opts)
                    ngx.say(err)
                end
            }
        }
        location /leaf { echo -n "leaf $arg_n"; }
        location /middle {
            content_by_lua_block {
                local a, b = ngx.location.capture_multi({ { "/leaf?n=1" }, { "/leaf?n=2" } })
                ngx.print(a.status, " ", a.body, ", ", b.status, " ", b.body)
            }
        }
        location /nested {
            content_by_lua_block {
                local res = ngx.location.capture("/middle")
                ngx.say(res.status, " [", res.body, "]")
            }
        }
        location /fails { content_by_lua_block { ngx.exit(ngx.ERROR) } }
        location /errs { return 503; }
        location /half {
            content_by_lua_block {
                ngx.header["Content-Length"] = 1024
                ngx.print("hello world")
                ngx.flush(true)
                ngx.exit(ngx.ERROR)
            }
        }
        location /cut {
            internal;
            proxy_buffering on;
            proxy_pass http://127.0.0.1:%%PORT_8080%%/half;
        }
        location /failing {
            content_by_lua_block {
                for _, uri in ipairs({ "/fails", "/errs", "/cut" }) do
                    local res = ngx.location.capture(uri)
                    ngx.say(uri, " ", res.status, " [", res.body, "] ", tostring(res.truncated), " ", tostring(res.header["Content-Type"]))
                end
            }
        }
        location /which { echo_location /which/lua; }
        location /which/lua { content_by_lua_block { ngx.say(ngx.is_subrequest, " ", ngx.var.uri) } }
        location /static {
            content_by_lua_block {
                local res = ngx.location.capture("/index.html")
                ngx.say(res.status, " ", res.header["Last-Modified"] ~= nil, " ", res.body)
            }
        }
        location /self { content_by_lua_block { ngx.location.capture("/self") } }
        location /hdr/sub {
            rewrite_by_lua_block { ngx.req.set_header("User-Agent", "changed") }
            echo "sub $http_user_agent";
        }
        location /hdr {
            content_by_lua_block {
                local res = ngx.location.capture("/hdr/sub")
                ngx.print(res.body)
                ngx.say("main ", ngx.var.http_user_agent)
            }
        }
        location /numkey {
            content_by_lua_block {
                local ok, err = pcall(ngx.location.capture, "/leaf", { args = { [3] = "x" } })
                ngx.say(err)
            }
        }
    }
`, { 'html/index.html': 'static\n' }, ECHO);

test('capture `body`: the subrequest reads it, with a Content-Length of its own, proxied or not; a GET capture gets no parent body', async () => {
  assert.equal((await same(pair, '/body', 'Content-Length: 2\r\n', 'hi')).body, 'PUT [3]\none|POST [5]\n12345|GET []\n');
});

test('the parent body goes to PUT and POST captures, or to any with always_forward_body', async () => {
  assert.equal((await same(pair, '/forward', 'Content-Length: 4\r\n', 'data')).body, 'GET []\n|GET [4]\ndata|PUT [4]\ndata');
});

test('capture `vars`, copy_all_vars, share_all_vars: which variable values the subrequest starts with', async () => {
  assert.equal((await same(pair, '/vars')).body,
    'pet=! args=\npet=dog! args=a=1\npet=cat! args=\nparent cat\npet=cat! args=\nparent cat!\n');
});

test('a `vars` name that is not defined, or not changeable: 500 and the error line', async () => {
  assert.equal((await same(pair, '/undefined')).status, 500);
  await sameLog(pair, /variable "nosuch" cannot be assigned/);
  assert.equal((await same(pair, '/fixed')).status, 500);
  await sameLog(pair, /variable "query_string" not changeable/);
});

test('bad option values are errors in OpenResty words', async () => {
  assert.equal((await same(pair, '/bad')).body, 'Bad vars option value\nattempt to use bad variable value type boolean\n'
    + 'Bad http request body\nBad http request method\nBad copy_all_vars option value\nBad args option value\n');
});

test('captures nest: capture_multi inside a captured location', async () => {
  assert.equal((await same(pair, '/nested')).body, '200 [200 leaf 1, 200 leaf 2]\n');
});

test('a capture that fails, answers an error status, or is cut short is a result; the request goes on', async () => {
  const r = await same(pair, '/failing');
  assert.equal(r.body, '/fails 500 [] true text/plain\n/errs 503 [] true text/plain\n/cut 200 [hello world] true text/plain\n');
});

test('ngx.is_subrequest, ngx.var.uri in a subrequest and in the main request', async () => {
  assert.equal((await same(pair, '/which')).body, 'true /which/lua\n');
  assert.equal((await same(pair, '/which/lua')).body, 'false /which/lua\n');
});

test('a static file capture has its Last-Modified', async () => {
  assert.equal((await same(pair, '/static')).body, '200 true static\n\n');
});

test('a capture of its own location ends in the subrequest cycle error (a failed capture, the outer ones go on)', async () => {
  assert.equal((await same(pair, '/self')).status, 200);
  await sameLog(pair, /lua subrequests cycle while processing "\/self"/);
});

test('a non-string key in the args option table is an error', async () => {
  assert.equal((await same(pair, '/numkey')).body, 'attempt to use a non-string key in the "args" option table\n');
});

test("a capture's request headers are its own copy: setting one leaves the parent's", async () => {
  assert.equal((await same(pair, '/hdr', 'User-Agent: given\r\n')).body, 'sub changed\nmain given\n');
});
