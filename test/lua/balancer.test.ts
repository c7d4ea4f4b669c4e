// balancer_by_lua_block and ngx.balancer: the hook picks each try's peer. Reference: Debian's
// nginx 1.22 + libnginx-mod-http-lua 0.10.23 on the same configuration, with two loopback
// origins in the same server (A on 8081, B on 8082), one that echoes the body it got (8084) and
// a port nobody listens on (8083).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { ask, logged, luaPair, same } from './hooks-kit.ts';
import type { RunningServer } from '../kit/server.ts';

const pair = await luaPair({ after }, `
    lua_shared_dict rr 64k;
    upstream placeholder {
        server 0.0.0.1;
        balancer_by_lua_block {
            local b = require "ngx.balancer"
            local n = ngx.shared.rr:incr("n", 1, 0)
            assert(b.set_current_peer("127.0.0.1", n % 2 == 1 and ${'%%PORT_8081%%'} or ${'%%PORT_8082%%'}))
        }
    }
    upstream fromfile {
        server 0.0.0.1;
        balancer_by_lua_file bal.lua;
    }
    upstream modes {
        server 127.0.0.1:%%PORT_8082%%;
        balancer_by_lua_block {
            local b = require "ngx.balancer"
            local state, code = b.get_last_failure()
            ngx.log(ngx.NOTICE, "try ", tostring(state), " ", tostring(code))
            local mode = ngx.var.arg_mode
            if mode == "retry" then
                if not state then
                    assert(b.set_more_tries(1))
                    assert(b.set_current_peer("127.0.0.1:%%PORT_8083%%"))
                else
                    ngx.var.last = state .. " " .. code
                    assert(b.set_current_peer("127.0.0.1", %%PORT_8081%%))
                end
            elseif mode == "more" then
                local ok, warning = b.set_more_tries(3)
                ngx.log(ngx.NOTICE, "more ", tostring(ok), " ", tostring(warning))
                assert(b.set_current_peer("127.0.0.1", %%PORT_8083%%))
            elseif mode == "host" then
                local ok, err = b.set_current_peer("localhost", %%PORT_8081%%)
                ngx.log(ngx.NOTICE, "host ", tostring(ok), " ", err)
            elseif mode == "error" then
                error("boom")
            elseif mode == "sleep" then
                ngx.sleep(0.001)
            elseif mode == "next" then
                if not state then
                    b.set_more_tries(1)
                    assert(b.set_current_peer("127.0.0.1", %%PORT_8082%%))
                else
                    ngx.var.last = state .. " " .. code
                    assert(b.set_current_peer("127.0.0.1", %%PORT_8081%%))
                end
            elseif mode == "slow" then
                assert(b.set_timeouts(nil, nil, 0.1))
                assert(b.set_current_peer("127.0.0.1", %%PORT_8081%%))
            elseif mode == "exit" then
                print("phase ", ngx.get_phase(), " ctx ", tostring(ngx.ctx.seen))
                ngx.exit(403)
            elseif mode == "unix" then
                assert(b.set_current_peer("unix:%%PREFIX%%/origin.sock"))
            elseif mode == "refused" then
                assert(b.set_current_peer("127.0.0.1", %%PORT_8083%%))
            elseif mode == "timeouts" then
                assert(b.set_timeouts(1, 2, 3))
                ngx.log(ngx.NOTICE, "bad ", tostring(select(2, pcall(b.set_timeouts, -1))))
                assert(b.set_current_peer("127.0.0.1", %%PORT_8081%%))
            end
        }
    }
    upstream fallback {
        server 127.0.0.1:%%PORT_8083%%;
        balancer_by_lua_block { ngx.log(ngx.NOTICE, "fallback try") }
    }
    upstream rebody {
        server 127.0.0.1:%%PORT_8084%%;
        balancer_by_lua_block {
            ngx.req.set_body_data("set in the balancer")
            assert(require("ngx.balancer").recreate_request())
        }
    }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /rr { proxy_pass http://placeholder; }
        location /fallback { proxy_pass http://fallback; }
        location /rebody { proxy_pass http://rebody; }
        location /file { proxy_pass http://fromfile; }
        location / {
            set $last "";
            add_header X-Last-Failure $last always;
            proxy_next_upstream_tries 4;
            proxy_pass http://modes;
        }
        location /nf {
            set $last "";
            add_header X-Last-Failure $last always;
            proxy_next_upstream error http_404;
            proxy_pass http://modes;
        }
        location /outside {
            content_by_lua_block {
                local b = require "ngx.balancer"
                ngx.say(table.concat({tostring(b.set_current_peer("127.0.0.1", 1))}, " "), " ", select(2, b.set_current_peer("127.0.0.1", 1)))
                ngx.say(tostring(b.get_last_failure()), " ", select(3, b.get_last_failure()))
            }
        }
    }
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        location / { return 200 "A $request_uri\\n"; }
        location /slow { echo_sleep 2; echo late; }
    }
    server {
        listen 127.0.0.1:%%PORT_8084%%;
        location / {
            content_by_lua_block {
                ngx.req.read_body()
                ngx.say(ngx.var.http_content_length, " ", ngx.req.get_body_data())
            }
        }
    }
    server {
        listen unix:%%PREFIX%%/origin.sock;
        location / { return 200 "U $request_uri\\n"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8082%%;
        location / { return 200 "B $request_uri\\n"; }
        location /nf { return 404; }
    }
`, { 'bal.lua': 'local b = require "ngx.balancer"\nassert(b.set_current_peer("127.0.0.1:" .. ngx.var.arg_port))\n' }, 'load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;\n');

/** error.log lines for `re` with this server's ports named as in the configuration. */
async function lines(srv: RunningServer, re: RegExp): Promise<string[]> {
  const ports = [8081, 8082, 8083].map((p) => [String(srv.port(p)), `P${p}`]);
  return (await logged(srv, re)).map((l) => ports.reduce((s, [port, name]) => s.split(port).join(name), l));
}

async function sameLines(re: RegExp): Promise<string[]> {
  const gh = await lines(pair.gh, re);
  if (pair.ng) assert.deepEqual(gh, await lines(pair.ng, re));
  return gh;
}

test('round robin in Lua over two origins, with a placeholder server in the block', async () => {
  const bodies: string[] = [];
  for (let i = 0; i < 4; i++) bodies.push((await same(pair, `/rr/${i}`)).body);
  assert.deepEqual(bodies, ['A /rr/0\n', 'B /rr/1\n', 'A /rr/2\n', 'B /rr/3\n']);
});

test('balancer_by_lua_file', async () => {
  assert.equal((await ask(pair.gh, `/file?port=${pair.gh.port(8081)}`)).body, `A /file?port=${pair.gh.port(8081)}\n`);
  if (pair.ng) assert.equal((await ask(pair.ng, `/file?port=${pair.ng.port(8081)}`)).body, `A /file?port=${pair.ng.port(8081)}\n`);
});

test('a refused connection: set_more_tries gives a second try, which sees "failed" and 502', async () => {
  const r = await same(pair, '/x?mode=retry');
  assert.equal(r.status, 200);
  assert.equal(r.body, 'A /x?mode=retry\n');
  assert.deepEqual(r.headers.find(([n]) => n === 'X-Last-Failure'), ['X-Last-Failure', 'failed 502']);
  const seen = await sameLines(/try \S+ \S+ while connecting to upstream.*mode=retry/);
  assert.match(seen[0], /\[lua\] balancer_by_lua\(nginx\.conf:\d+\):\d+: try nil nil while connecting to upstream, client: 127\.0\.0\.1, server: , request: "GET \/x\?mode=retry HTTP\/1\.1", host: "localhost"$/);
  assert.match(seen[1], /try failed 502 while connecting to upstream, .*upstream: "http:\/\/127\.0\.0\.1:P8083\/x\?mode=retry"/);
});

test('a 404 with proxy_next_upstream http_404: the next try sees "next" and 404', async () => {
  const r = await same(pair, '/nf?mode=next');
  assert.equal(r.body, 'A /nf?mode=next\n');
  assert.deepEqual(r.headers.find(([n]) => n === 'X-Last-Failure'), ['X-Last-Failure', 'next 404']);
});

test('set_current_peer("unix:/path") (Gatehouse only: Debian\'s workers may not write root\'s socket)', async () => {
  assert.equal((await ask(pair.gh, '/x?mode=unix')).body, 'U /x?mode=unix\n');
});

test('ngx.exit(403) in the hook is a 500 (as with OpenResty 0.10.23); print, ngx.get_phase and ngx.ctx work there', async () => {
  assert.equal((await same(pair, '/x?mode=exit')).status, 500);
  const seen = await sameLines(/phase \S+ ctx .*mode=exit/);
  assert.match(seen[0], /^\[notice\] \[lua\] balancer_by_lua\(nginx\.conf:\d+\):\d+: phase balancer ctx nil while connecting to upstream, client/);
});

test('without more tries a refused peer is the 502', async () => {
  const r = await same(pair, '/x?mode=refused');
  assert.equal(r.status, 502);
  await sameLines(/connect\(\) failed .*mode=refused/);
});

test('set_more_tries past proxy_next_upstream_tries is reduced, with OpenResty\'s warning', async () => {
  const r = await same(pair, '/x?mode=more');
  assert.equal(r.status, 502);
  const seen = await sameLines(/: more .*mode=more/);
  assert.deepEqual(seen.map((l) => /more (.*) while/.exec(l)![1]),
    ['true nil', 'true reduced tries due to limit', 'true reduced tries due to limit', 'true reduced tries due to limit']);
});

test('a host name is refused: "no host allowed", then the block\'s own server', async () => {
  const r = await same(pair, '/x?mode=host');
  assert.equal(r.body, 'B /x?mode=host\n');
  const seen = await sameLines(/host nil .*mode=host/);
  assert.match(seen[0], /\[lua\] balancer_by_lua\(nginx\.conf:\d+\):\d+: host nil no host allowed while connecting to upstream/);
});

test('an error in the hook is a 500, logged as OpenResty logs it', async () => {
  const r = await same(pair, '/x?mode=error');
  assert.equal(r.status, 500);
  const seen = await sameLines(/failed to run balancer_by_lua/);
  assert.match(seen[0], /^\[error\] failed to run balancer_by_lua\*: balancer_by_lua\(nginx\.conf:\d+\):\d+: boom$/);
});

test('the hook cannot wait: ngx.sleep is refused', async () => {
  const r = await same(pair, '/x?mode=sleep');
  assert.equal(r.status, 500);
  const text = pair.gh.readFile('error.log');
  assert.match(text, /failed to run balancer_by_lua\*: balancer_by_lua\(nginx\.conf:\d+\):\d+: API disabled in the context of balancer_by_lua\*\nstack traceback:\n\t\[C\]: in function '(ngx\.)?sleep'/);
});

test('set_timeouts checks its arguments; the try goes on', async () => {
  assert.equal((await same(pair, '/x?mode=timeouts')).body, 'A /x?mode=timeouts\n');
  const seen = await sameLines(/: bad .*mode=timeouts/);
  assert.match(seen[0], /: bad bad connect timeout while connecting/);
});

test('set_timeouts: the read timeout set in the hook ends a slow try with 504', async () => {
  assert.equal((await same(pair, '/slow?mode=slow')).status, 504);
  await sameLines(/upstream timed out .*mode=slow/);
});

test('outside balancer_by_lua the functions answer "no upstream found"', async () => {
  const r = await same(pair, '/outside');
  assert.equal(r.body, 'nil no upstream found\nnil no upstream found\n');
});

test('a hook that sets no peer over a refused server: one try of the block\'s own, then 502', async () => {
  assert.equal((await same(pair, '/fallback')).status, 502);
  const seen = await sameLines(/fallback try|connect\(\) failed .*\/fallback/);
  assert.equal(seen.length, 2);
  assert.match(seen[1], /^\[error\] connect\(\) failed \(111: Connection refused\) while connecting to upstream/);
});

// Gatehouse only: OpenResty 0.10.23 keeps the old Content-Length and the request hangs; later
// releases (lua-nginx-module's t/138-balancer.t TEST 20) send the body set in the hook
test('ngx.req.set_body_data then recreate_request in the hook: the upstream gets the new body', async () => {
  assert.equal((await ask(pair.gh, '/rebody')).body, '19 set in the balancer\n');
  assert.equal((await ask(pair.gh, 'POST /rebody HTTP/1.1', 'Content-Length: 3\r\n', 'abc')).body, '19 set in the balancer\n');
});
