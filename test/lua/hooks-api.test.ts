// The ngx utilities, ngx.req readers and ngx.var as OpenResty gives them, and the traceback of a
// failed hook. Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23 on the same config.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { ask, logged, luaPair, same } from './hooks-kit.ts';

const pair = await luaPair({ after }, `
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /strings {
            content_by_lua_block {
                ngx.say(ngx.escape_uri("a b/c?d=e&f~!*'()\\xe9\\0"), " ", ngx.unescape_uri("a+b%41%zz%4"))
                ngx.say(ngx.encode_args({a = "x y"}), " ", ngx.encode_args({b = true}), " ", ngx.encode_args({c = {"1", "2"}}))
                local args = ngx.decode_args("a=1&b&c=&d=1&d=2&e=x+y%21")
                ngx.say(args.a, " ", tostring(args.b), " [", args.c, "] ", args.d[1], args.d[2], " ", args.e)
                ngx.say(ngx.md5("abc"), " ", #ngx.md5_bin("abc"), " ", ngx.encode_base64(ngx.sha1_bin("abc")))
                ngx.say(ngx.encode_base64(ngx.hmac_sha1("key", "data")), " ", ngx.crc32_short("abc"), " ", ngx.crc32_long("abc"))
                ngx.say(ngx.encode_base64("ab"), " ", ngx.encode_base64("ab", true), " ", ngx.decode_base64("YWI="), " ", tostring(ngx.decode_base64("Y")), " ", tostring(ngx.decode_base64("!!")))
                ngx.say(ngx.quote_sql_str("a'b\\"c\\\\d\\ne\\0"))
                ngx.say(ngx.http_time(1290079655), " | ", ngx.cookie_time(1290079655), " | ", ngx.parse_http_time("Thu, 18 Nov 2010 11:27:35 GMT"))
                ngx.say(type(ngx.time()), " ", type(ngx.now()), " ", #ngx.today(), " ", #ngx.localtime(), " ", #ngx.utctime())
                ngx.say(tostring(ngx.null), " ", type(ngx.null), " ", ngx.null == ngx.null, " ", ngx.OK, " ", ngx.ERR, " ", ngx.HTTP_NOT_FOUND, " ", ngx.get_phase())
            }
        }
        location ~ ^/req/(\\w+) {
            content_by_lua_block {
                local h = ngx.req.get_headers()
                ngx.say(h.host, " ", h["X-Multi"][1], ",", h.x_multi[2], " ", h["user-agent"])
                local raw = ngx.req.get_headers(nil, true)
                ngx.say(tostring(raw["X-Multi"] ~= nil), " ", tostring(raw["x-multi"]))
                local args = ngx.req.get_uri_args()
                ngx.say(args.a, " ", tostring(args.flag), " ", ngx.var[1], " ", ngx.var.uri, " ", ngx.var.args)
                ngx.say(ngx.req.get_method(), " ", ngx.req.http_version(), " ", tostring(ngx.req.is_internal()), " ", type(ngx.req.start_time()))
                ngx.req.clear_header("X-Multi")
                ngx.req.set_header("X-New", "v")
                ngx.say(tostring(ngx.req.get_headers()["x-multi"]), " ", ngx.var.http_x_new)
                ngx.header["X-Out"] = "o"
                local resp = ngx.resp.get_headers()
                ngx.say(resp["x-out"], " ", resp.x_out)
            }
        }
        location /re {
            content_by_lua_block {
                local m = ngx.re.match(ngx.var.uri, [[^/(\\w+)/(?<rest>.*)$]], "jo")
                local s, n = ngx.re.gsub("a1b22c333", [[\\d+]], "<$0>")
                ngx.say(m[1], " ", m.rest, " ", s, " ", n, " ", type(require("ngx.re")))
            }
        }
        location /cjson {
            content_by_lua_block {
                local cjson = require "cjson"
                local safe = require "cjson.safe"
                ngx.say(cjson.encode({1, 2.5, "a/b\\"c\\n", true, cjson.null}))
                ngx.say(cjson.encode({}), " ", cjson.encode({list = {}}), " ", cjson.encode("x"), " ", cjson.encode(10/2))
                local v = cjson.decode([[{"a":[1,2,{"b":null}],"s":"\\u00e9x","n":-1.5e3,"t":true}]])
                ngx.say(v.a[2], " ", v.a[3].b == cjson.null, " ", #v.s, " ", v.n, " ", tostring(v.t), " ", tostring(cjson.null == ngx.null))
                ngx.say(tostring(safe.decode("{bad")), " ", select("#", safe.decode("{bad")), " ", tostring(safe.encode(function() end)))
                ngx.say((select(2, pcall(cjson.encode, {[true] = 1}))))
            }
        }
        location /results {
            content_by_lua_block {
                ngx.say(select("#", ngx.req.get_headers()), select("#", ngx.req.get_headers(1)), select("#", ngx.req.get_uri_args()),
                    select("#", ngx.req.get_uri_args(1)), select("#", ngx.resp.get_headers()), select("#", ngx.decode_args("a=1")))
                ngx.say(ngx.req.get_headers().User_Agent_X, ngx.req.get_headers().USER_AGENT_X, tostring(ngx.req.get_headers().none))
                ngx.say("one")
                ngx.say("")
                ngx.print("two", "\\n")
                ngx.say(3, nil, true, {"a", {"b", 4}})
                ngx.print("last")
            }
        }
        location /traceback {
            content_by_lua_block {
                local function inner() error("deep") end
                local function outer() inner() end
                outer()
            }
        }
    }
`);

test('escaping, args, digests, base64, SQL quoting, time formats, constants', async () => {
  const r = await same(pair, '/strings');
  assert.equal(r.status, 200);
  assert.match(r.body, /^a%20b%2Fc%3Fd%3De%26f~!\*'\(\)%E9%00 a bA%zz%4\n/);
});

test('ngx.req: headers (any case, several values, raw), uri args, captures, method, version, set/clear', async () => {
  const r = await same(pair, '/req/abc?a=1&flag', 'X-Multi: one\r\nx-multi: two\r\nUser-Agent: t\r\n');
  assert.equal(r.body.split('\n')[0], 'localhost one,two t');
});

test('ngx.req/ngx.resp tables: a second result only when truncated; ngx.say and ngx.print of one string and of several values', async () => {
  const r = await same(pair, '/results?a=1&b=2', 'User-Agent-X: u\r\n');
  assert.equal(r.body, '121211\nuunil\none\n\ntwo\n3niltrueab4\nlast');
});

test('a failed hook logs its traceback as OpenResty does', async () => {
  assert.equal((await same(pair, '/traceback')).status, 500);
  const gh = await logged(pair.gh, /lua entry thread aborted: runtime error: content_by_lua\(nginx\.conf:\d+\):2: deep/);
  assert.equal(gh.length, 1);
  const text = (srv: typeof pair.gh) => {
    const log = srv.readFile('error.log');
    const at = log.indexOf('lua entry thread aborted');
    return log.slice(at, log.indexOf(', client:', at));
  };
  const mine = text(pair.gh);
  assert.match(mine, /stack traceback:\ncoroutine 0:\n/);
  if (pair.ng) assert.equal(mine, text(pair.ng));
});

test('ngx.re is there, and require "ngx.re" loads', async () => {
  assert.equal((await same(pair, '/re/tail/end')).body, 're tail/end a<1>b<22>c<333> 3 table\n');
});

// Debian's nginx has no cjson (OpenResty bundles lua-cjson 2.1.0.10): the values are lua-cjson's documented ones
test('cjson and cjson.safe: encode and decode as lua-cjson', async () => {
  const r = await ask(pair.gh, '/cjson');
  assert.equal(r.body, [
    '[1,2.5,"a\\/b\\"c\\n",true,null]',
    '{} {"list":{}} "x" 5',
    '2 true 3 -1500 true true',
    'nil 2 nil',
    'Cannot serialise table: table key must be a number or string',
    '',
  ].join('\n'));
});
