// ngx.shared.DICT (lua_shared_dict): OpenResty's results and error strings, and one store for
// every worker. Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23 on the same config.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { ask, luaPair, same } from './hooks-kit.ts';

const pair = await luaPair({ after }, `
    lua_shared_dict cache 1m;
    lua_shared_dict counters 64k;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /ops {
            content_by_lua_block {
                local d = ngx.shared.cache
                d:flush_all()
                ngx.say("set ", tostring(d:set("s", "str\\0bin")), " ", tostring(d:set("n", 42, 0, 7)))
                ngx.say("get ", d:get("s") == "str\\0bin", " ", d:get("n"), " ", select(2, d:get("n")), " ", tostring(d:get("missing")))
                ngx.say("add ", table.concat({tostring(d:add("s", "x"))}, ","), " ", select(2, d:add("s", "x")), " ", tostring(d:add("new", true)))
                ngx.say("replace ", tostring(d:replace("nope", 1)), " ", select(2, d:replace("nope", 1)), " ", tostring(d:replace("new", false)), " ", tostring(d:get("new")))
                ngx.say("incr ", d:incr("n", 8), " ", tostring(d:incr("absent", 1)), " ", select(2, d:incr("absent", 1)), " ", d:incr("absent", 1, 10), " ", select(2, d:incr("s", 1)))
                d:set("t", "v", 100)
                local ttl = d:ttl("t")
                ngx.say("ttl ", ttl > 99 and ttl <= 100, " ", d:ttl("n"), " ", select(2, d:ttl("zzz")))
                d:delete("t")
                ngx.say("delete ", tostring(d:get("t")))
                local keys = d:get_keys()
                table.sort(keys)
                ngx.say("keys ", table.concat(keys, ","))
                ngx.say("bad ", select(2, d:set(nil, 1)), " ", select(2, d:set("", 1)), " ", select(2, d:set("k", {})))
                d:flush_all()
                ngx.say("flushed ", #d:get_keys(), " ", tostring(d:get("s")))
            }
        }
        location /nil-values {
            content_by_lua_block {
                local d = ngx.shared.cache
                d:set("there", 1)
                for _, op in ipairs({ "add", "safe_add", "replace" }) do
                    local ok, err, forcible = d[op](d, op == "replace" and "there" or "fresh", nil)
                    ngx.say(op, " ", tostring(ok), " ", tostring(err), " ", tostring(forcible))
                end
                ngx.say("kept ", d:get("there"), " ", tostring(d:get("fresh")))
            }
        }
        location /expire {
            content_by_lua_block {
                local d = ngx.shared.cache
                d:set("short", "gone soon", 0.001)
                ngx.sleep(0.01)
                ngx.say(tostring(d:get("short")), " ", #d:get_keys(0) >= 0)
            }
        }
    }
`);

test('get/set/add/replace/incr/delete/ttl/get_keys/flush_all give what OpenResty gives', async () => {
  const r = await same(pair, '/ops');
  assert.equal(r.body, [
    'set true true',
    'get true 42 7 nil',
    'add false exists true',
    'replace false not found true false',
    'incr 50 nil not found 11 not a number',
    'ttl true 0 not found',
    'delete nil',
    'keys absent,n,new,s',
    'bad nil key empty key bad value type',
    'flushed 0 nil',
    '',
  ].join('\n'));
});

test('an entry past its exptime is gone', async () => {
  assert.equal((await same(pair, '/expire')).body, 'nil true\n');
});

test('one dict for all workers: counts from many connections add up', async () => {
  const two = await luaPair({ after }, `
    lua_shared_dict counters 64k;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /count { content_by_lua_block { ngx.say(ngx.shared.counters:incr("hits", 1, 0), " of ", ngx.worker.count()) } }
    }
  `, undefined, 'worker_processes 2;\n');
  for (const srv of [two.gh, two.ng]) {
    if (!srv) continue;
    const answers: string[] = [];
    for (let i = 0; i < 20; i++) answers.push((await ask(srv, '/count')).body);
    assert.deepEqual(answers, Array.from({ length: 20 }, (_, i) => `${i + 1} of 2\n`));
  }
});

test('a reload keeps the dict\'s entries and starts a fresh VM (globals gone)', async () => {
  const conf = `
    lua_shared_dict keep 64k;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /put { content_by_lua_block { ngx.shared.keep:set("k", "kept") global_value = "old vm" ngx.say("ok") } }
        location /get { content_by_lua_block { ngx.say(ngx.shared.keep:get("k"), " ", tostring(global_value)) } }
    }
  `;
  const kept = await luaPair({ after }, conf);
  for (const srv of [kept.gh, kept.ng]) {
    if (!srv) continue;
    assert.equal((await ask(srv, '/put')).body, 'ok\n');
    await srv.reload();
    assert.equal((await ask(srv, '/get')).body, 'kept nil\n');
  }
});

test('add, safe_add and replace refuse a nil value (set deletes)', async () => {
  assert.equal((await same(pair, '/nil-values')).body, 'add false attempt to add or replace nil values false\n'
    + 'safe_add false attempt to add or replace nil values false\nreplace false attempt to add or replace nil values false\nkept 1 nil\n');
});
