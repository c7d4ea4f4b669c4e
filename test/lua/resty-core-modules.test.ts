// lua-resty-core's modules that OpenResty code requires by name, built in here: ngx.process,
// ngx.errlog, ngx.base64, ngx.resp, ngx.req, resty.core.base, resty.core.regex, resty.core.time.
// Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23 with its lua-resty-core 0.1.25
// on the same configuration. Debian's nginx lacks OpenResty's privileged agent patch
// ("missing privileged agent process patch in the nginx core"), so the agent is checked on
// Gatehouse alone, as OpenResty documents it: a process that runs init_worker_by_lua and timers,
// listens on nothing, and where ngx.worker.id() is nil.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { ask, luaPair, LUA_MODULES, same, sameLog } from './hooks-kit.ts';
import { startGatehouse } from '../kit/server.ts';

const pair = await luaPair({ after }, `
    init_by_lua_block {
        local process = require "ngx.process"
        ngx.log(ngx.NOTICE, "init: ", process.type(), " ", type(process.get_master_pid()))
        ngx.log(ngx.NOTICE, "init bad connections: ", select(2, process.enable_privileged_agent(-1)))
    }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /process {
            content_by_lua_block {
                local process = require "ngx.process"
                ngx.say(process.type(), " ", type(process.get_master_pid()))
                ngx.say(process.enable_privileged_agent())
            }
        }
        location /errlog {
            content_by_lua_block {
                local errlog = require "ngx.errlog"
                ngx.say("level ", errlog.get_sys_filter_level() == ngx.DEBUG)
                errlog.raw_log(ngx.WARN, "a raw line")
                ngx.say(pcall(errlog.raw_log, "x", "y"))
                ngx.say(pcall(errlog.raw_log, ngx.ERR, 1))
                ngx.say(pcall(errlog.raw_log, 99, "y"))
            }
        }
        location /base64 {
            content_by_lua_block {
                local b64 = require "ngx.base64"
                ngx.say(b64.encode_base64url("\\255\\254hello?>"), " ", b64.encode_base64url(""))
                ngx.say(b64.decode_base64url("__5oZWxsbz8-"), " ", b64.decode_base64url("aGk=junk"))
                for _, bad in ipairs({ "a", "a+b", "a/bc", 1 }) do
                    ngx.say(tostring(bad), ": ", tostring(select(2, b64.decode_base64url(bad))))
                end
                ngx.say(select(2, b64.encode_base64url(nil)))
            }
        }
        location /add-header {
            content_by_lua_block {
                local resp = require "ngx.resp"
                ngx.header["X-A"] = "1"
                resp.add_header("X-A", "2")
                resp.add_header("X-B", { "3", "4" })
                resp.add_header("X-C", "5")
                local req = require "ngx.req"
                req.add_header("Foo", "bar")
                req.add_header("Foo", { "baz", "qux" })
                req.add_header("New", "1")
                local h = ngx.req.get_headers()
                ngx.say(table.concat(h.foo, ","), " ", h.new)
            }
        }
        location /base {
            content_by_lua_block {
                local base = require "resty.core.base"
                ngx.say(base.FFI_OK, base.FFI_ERROR, base.FFI_AGAIN, base.FFI_BUSY, base.FFI_DONE,
                        base.FFI_DECLINED, base.FFI_NO_REQ_CTX, base.FFI_BAD_CONTEXT, " ", base.version)
                ngx.say("request ", base.get_request() ~= nil)
                local t = base.new_tab(4, 0)
                local r1, r2 = base.ref_in_table(t, "a"), base.ref_in_table(t, "b")
                ngx.say("refs ", r1, " ", r2, " ", base.ref_in_table(t, nil))
                base.allows_subsystem("http", "stream")
                ngx.say(pcall(base.allows_subsystem, "stream"))
                local regex = require "resty.core.regex"
                ngx.say(regex.re_match_compile("a(b", "jo"))
                ngx.say(regex.re_match_compile("ab", "jo") ~= nil)
                local time = require "resty.core.time"
                local ms = time.monotonic_msec()
                ngx.say("monotonic ", ms > 0, " ", math.abs(time.monotonic_time() - ms / 1000) < 1)
                ngx.say(require("resty.core").version, " ", require("resty.core.var").version)
            }
        }
    }
`);

test('ngx.process in a worker and in init_by_lua', async () => {
  assert.equal((await same(pair, '/process')).body, 'worker number\nnilAPI disabled in the current context\n');
});

test('ngx.errlog: raw_log without the [lua] prefix, the filter level, the argument checks', async () => {
  const r = await same(pair, '/errlog');
  assert.match(r.body, /^level true\nfalse.*must be a number\)\nfalse.*must be a string\)\nfalsebad log level\n$/);
  await sameLog(pair, /a raw line/);
});

test('ngx.base64: the URL alphabet, unpadded, and nginx decoder\'s refusals', async () => {
  const r = await same(pair, '/base64');
  assert.match(r.body, /^__5oZWxsbz8- \nÿþhello\?> hi\na: invalid input\na\+b: invalid input\n/);
});

test('ngx.resp.add_header and ngx.req.add_header append to what is there', async () => {
  const r = await same(pair, '/add-header', 'Foo: a\r\n');
  assert.equal(r.body, 'a,bar,baz,qux 1\n');
  assert.deepEqual(r.headers.filter(([n]) => n.startsWith('X-')), [['X-A', '1'], ['X-A', '2'], ['X-B', '3'], ['X-B', '4'], ['X-C', '5']]);
});

test('resty.core.base, resty.core.regex and resty.core.time without the FFI', async () => {
  const r = await same(pair, '/base');
  assert.match(r.body, /^0-1-2-3-4-5-100-101 0\.1\.25\nrequest true\nrefs 1 2 -1\nfalse.*unsupported subsystem: http\nnilpcre_compile\(\) failed: missing \) in "a\(b"\ntrue\nmonotonic true true\n/);
});

test('init_by_lua sees the master', async () => {
  const lines = await sameLog(pair, /\binit( bad connections)?: /);
  assert.match(lines.join('\n'), /^\[notice\] \[lua\] init_by_lua\(nginx.conf:\d+\):3: init: master number\n.*:4: init bad connections: bad 'connections' argument: number expected and greater than 0$/);
});

const AGENT_CONF = `${LUA_MODULES}worker_processes 2;
events {}
http {
    access_log off;
    lua_shared_dict seen 1m;
    init_by_lua_block {
        assert(require("ngx.process").enable_privileged_agent())
    }
    init_worker_by_lua_block {
        local process = require "ngx.process"
        ngx.log(ngx.NOTICE, "init_worker as ", process.type(), ", id ", tostring(ngx.worker.id()))
        if process.type() == "privileged agent" then
            -- the agent's timers run as a worker's do
            ngx.timer.at(0, function()
                ngx.log(ngx.NOTICE, "agent timer ran ", ngx.shared.seen:incr("agent timers", 1, 0))
            end)
        end
    }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /who {
            content_by_lua_block {
                ngx.say(require("ngx.process").type(), " ", ngx.worker.id(), " agent timers ", ngx.shared.seen:get("agent timers"))
            }
        }
        location /leave {
            content_by_lua_block {
                ngx.say("leaving ", ngx.worker.id())
                require("ngx.process").signal_graceful_exit()
            }
        }
    }
}
`;

test('the privileged agent: started with the workers, runs init_worker and timers, listens on nothing, survives a reload', async (t) => {
  const srv = await startGatehouse({ conf: AGENT_CONF });
  t.after(() => srv.stop());
  await srv.waitForLog('error.log', /init_worker as privileged agent, id nil/, 10_000);
  const whos = new Set<string>();
  for (let i = 0; i < 20; i++) {
    const r = await ask(srv, '/who');
    assert.equal(r.status, 200);
    whos.add(r.body.replace(/ agent timers .*/s, ''));
  }
  // only workers answer (the agent has no listener); both may
  for (const w of whos) assert.match(w, /^worker [01]$/);
  await srv.waitForLog('error.log', /agent timer ran 1/, 10_000);
  assert.match((await ask(srv, '/who')).body, /agent timers 1\n$/);
  const agentLines = () => srv.logLines().filter((l) => /init_worker as privileged agent/.test(l)).length;
  assert.equal(agentLines(), 1);
  assert.equal(srv.logLines().filter((l) => /start privileged agent process/.test(l)).length, 1);

  const text = await srv.reload({ until: /init_worker as privileged agent[^]*gracefully shutting down|gracefully shutting down[^]*init_worker as privileged agent/ });
  assert.match(text, /init_worker as privileged agent, id nil/);
  // the agent prepared the new configuration in place: no second agent
  assert.doesNotMatch(text, /start privileged agent process/);
  await srv.waitForLog('error.log', /agent timer ran 2/, 10_000);
  assert.match((await ask(srv, '/who')).body, /agent timers 2\n$/);
});

test('ngx.process.signal_graceful_exit: the worker stops gracefully and the master starts another', async (t) => {
  const srv = await startGatehouse({ conf: AGENT_CONF });
  t.after(() => srv.stop());
  await srv.waitForLog('error.log', /init_worker as privileged agent/, 10_000);
  const from = srv.logSize();
  assert.match((await ask(srv, '/leave')).body, /^leaving [01]\n$/);
  await srv.waitForLog('error.log', /gracefully shutting down[^]*exited with code 0[^]*start worker process/, 10_000, from);
  await srv.waitForLog('error.log', /init_worker as worker/, 10_000, from);
  assert.equal((await ask(srv, '/who')).status, 200);
});
