// rewrite/access/header_filter/body_filter/log/set/init hooks and how they hand the request on
// (ngx.exec, ngx.req.set_uri, ngx.var, ngx.ctx, the request body). Reference: Debian's nginx 1.22
// + libnginx-mod-http-lua 0.10.23 on the same config.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { LUA_MODULES, luaPair, same, sameLog } from './hooks-kit.ts';
import { nginxSkip, startGatehouse, startNginx } from '../kit/server.ts';

const pair = await luaPair({ after }, `
    init_by_lua_block { greeting = "hi from init" }
    init_worker_by_lua_block { worker_started = ngx.worker.id() ~= nil }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /chain {
            set $from_rewrite "";
            rewrite_by_lua_block { ngx.ctx.trail = "rewrite" ngx.var.from_rewrite = "yes" ngx.req.set_header("X-Added", "by rewrite") }
            access_by_lua_block {
                if ngx.var.arg_deny then ngx.exit(ngx.HTTP_FORBIDDEN) end
                ngx.ctx.trail = ngx.ctx.trail .. ">access"
            }
            content_by_lua_block {
                ngx.say(ngx.ctx.trail, ">content ", ngx.var.from_rewrite, " ", ngx.req.get_headers()["x-added"])
            }
            header_filter_by_lua_block { ngx.header["X-Filtered"] = ngx.status ngx.header.content_length = nil }
            body_filter_by_lua_block { ngx.arg[1] = string.upper(ngx.arg[1]) }
            log_by_lua_block { ngx.log(ngx.WARN, "log phase saw ", ngx.ctx.trail, " status ", ngx.status) }
        }
        location /static-upper {
            body_filter_by_lua_block {
                local chunk, eof = ngx.arg[1], ngx.arg[2]
                ngx.arg[1] = (chunk:gsub("o", "0"))
                if eof then ngx.arg[1] = ngx.arg[1] .. "[end]" end
            }
            header_filter_by_lua_block { ngx.header.content_length = nil }
            return 200 "foo boo";
        }
        location /set {
            set_by_lua_block $sum { return 1 + 2 }
            set_by_lua $joined 'return ngx.arg[1] .. "+" .. ngx.arg[2]' $arg_a "lit";
            set_by_lua_file $from_file html/set.lua;
            return 200 "$sum $joined $from_file\\n";
        }
        location /exec { content_by_lua_block { ngx.exec("/target", "a=1") } }
        location /exec-named { content_by_lua_block { ngx.exec("@named") } }
        location /target { content_by_lua_block { ngx.say("target ", ngx.var.args, " internal ", tostring(ngx.req.is_internal())) } }
        location @named { content_by_lua_block { ngx.say("named ", ngx.var.uri) } }
        location /jump {
            rewrite_by_lua_block { ngx.req.set_uri("/target", true) }
        }
        location /var-bad { content_by_lua_block { ngx.var.no_such_var = 1 } }
        location /init { content_by_lua_block { ngx.say(greeting, " ", tostring(worker_started)) } }
        location /body {
            content_by_lua_block {
                ngx.req.read_body()
                local args = ngx.req.get_post_args()
                ngx.say(ngx.req.get_body_data(), " | ", args.x, " ", args.y[2])
            }
        }
        location /rewrite-exit { rewrite_by_lua_block { ngx.exit(ngx.HTTP_GONE) } }
        location /need-body {
            lua_need_request_body on;
            content_by_lua_block { ngx.say(ngx.req.get_body_data()) }
        }
        location /raw-names {
            lua_use_default_type off;
            lua_transform_underscores_in_response_headers off;
            content_by_lua_block { ngx.header.x_under = "1" ngx.say("t") }
        }
        location /order {
            set $v "\${v}set";
            rewrite_by_lua_block { ngx.var.v = ngx.var.v .. "lua" }
            content_by_lua_block { ngx.say(ngx.var.v) }
        }
        location /in-if {
            if ($arg_lua) { content_by_lua_block { ngx.say("from if") } }
            content_by_lua_block { ngx.say("outside") }
        }
        location /new-body {
            rewrite_by_lua_block {
                ngx.req.read_body()
                if ngx.var.arg_append then
                    ngx.req.init_body()
                    ngx.req.append_body("part1,")
                    ngx.req.append_body("part2")
                    ngx.req.finish_body()
                else
                    ngx.req.set_body_data("replaced:" .. ngx.req.get_body_data())
                end
            }
            content_by_lua_block { ngx.say(ngx.req.get_body_data(), " ", ngx.var.http_content_length) }
        }
    }
`, { 'html/set.lua': 'return "file"\n' });

test('rewrite, access, content, header and body filters, log: one request through all, ngx.ctx shared', async () => {
  const r = await same(pair, '/chain');
  assert.equal(r.status, 200);
  assert.equal(r.body, 'REWRITE>ACCESS>CONTENT YES BY REWRITE\n');
  assert.deepEqual(r.headers.find(([n]) => n === 'X-Filtered'), ['X-Filtered', '200']);
  const lines = await sameLog(pair, /log phase saw/);
  assert.deepEqual(lines, ['[warn] [lua] log_by_lua(nginx.conf:23):1: log phase saw rewrite>access status 200 while logging request, client: 127.0.0.1, server: , request: "GET /chain HTTP/1.1", host: "localhost"']);
});

test('access_by_lua denies with ngx.exit(403): the error page goes through the filters', async () => {
  const r = await same(pair, '/chain?deny=1');
  assert.equal(r.status, 403);
  assert.match(r.body, /403 FORBIDDEN/);
});

test('body_filter_by_lua sees each chunk and the end flag', async () => {
  assert.equal((await same(pair, '/static-upper')).body, 'f00 b00[end]');
});

test('set_by_lua_block, set_by_lua with arguments, set_by_lua_file', async () => {
  assert.equal((await same(pair, '/set?a=q')).body, '3 q+lit file\n');
});

test('ngx.exec to a location and to a named location; ngx.req.set_uri with jump', async () => {
  assert.equal((await same(pair, '/exec')).body, 'target a=1 internal true\n');
  assert.equal((await same(pair, '/exec-named')).body, 'named /exec-named\n');
  assert.equal((await same(pair, '/jump')).body, 'target nil internal true\n');
});

test('writing an undefined ngx.var is a runtime error with OpenResty\'s message', async () => {
  assert.equal((await same(pair, '/var-bad')).status, 500);
  const lines = await sameLog(pair, /not found for writing/);
  assert.match(lines[0], /variable "no_such_var" not found for writing; maybe it is a built-in variable that is not changeable or you forgot to use "set \$no_such_var '';" in the config file to define it first/);
});

test('init_by_lua globals and init_worker_by_lua are seen by requests', async () => {
  assert.equal((await same(pair, '/init')).body, 'hi from init true\n');
});

test('ngx.req.read_body waits for the body; get_body_data and get_post_args read it', async () => {
  const body = 'x=1&y=a&y=b+c';
  const r = await same(pair, 'POST /body HTTP/1.1', `Content-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\n`, body);
  assert.equal(r.body, 'x=1&y=a&y=b+c | 1 b c\n');
});

test('ngx.exit in rewrite_by_lua ends the request with that status', async () => {
  assert.equal((await same(pair, '/rewrite-exit')).status, 410);
});

test('lua_need_request_body, lua_use_default_type off, lua_transform_underscores_in_response_headers off', async () => {
  const body = 'raw body';
  assert.equal((await same(pair, 'POST /need-body HTTP/1.1', `Content-Length: ${body.length}\r\n`, body)).body, 'raw body\n');
  const r = await same(pair, '/raw-names');
  assert.deepEqual(r.headers.filter(([n]) => /type|under/i.test(n)), [['x_under', '1']]);
});

test('rewrite_by_lua runs after the rewrite module, or before it with rewrite_by_lua_no_postpone', async () => {
  assert.equal((await same(pair, '/order')).body, 'setlua\n');
  const early = await luaPair({ after }, `
    rewrite_by_lua_no_postpone on;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /order {
            set $v "\${v}set";
            rewrite_by_lua_block { ngx.var.v = ngx.var.v .. "lua" }
            content_by_lua_block { ngx.say(ngx.var.v) }
        }
    }
  `);
  assert.equal((await same(early, '/order')).body, 'luaset\n');
});

test('ngx.req.set_body_data, init_body/append_body/finish_body replace the body later phases read', async () => {
  const body = 'orig';
  const extra = `Content-Length: ${body.length}\r\n`;
  assert.equal((await same(pair, 'POST /new-body HTTP/1.1', extra, body)).body, 'replaced:orig 13\n');
  assert.equal((await same(pair, 'POST /new-body?append=1 HTTP/1.1', extra, body)).body, 'part1,part2 11\n');
});

test('content_by_lua inside `if` in a location', async () => {
  assert.equal((await same(pair, '/in-if?lua=1')).body, 'from if\n');
  assert.equal((await same(pair, '/in-if')).body, 'outside\n');
});

test('an error in init_by_lua stops the server from starting, with the error', async () => {
  const conf = `${LUA_MODULES}events {}\nhttp {\n    init_by_lua_block { error("bad init") }\n`
    + '    server { listen 127.0.0.1:%%PORT_8080%%; location / { content_by_lua_block { ngx.say(1) } } }\n}\n';
  await assert.rejects(startGatehouse({ conf }), /init_by_lua error: init_by_lua\(nginx\.conf:5\):1: bad init/);
  if (!nginxSkip) await assert.rejects(startNginx({ conf }), /init_by_lua error: init_by_lua\(nginx\.conf:5\):1: bad init/);
});
