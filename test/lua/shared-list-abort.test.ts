// ngx.shared.DICT's lists (lpush/rpush/lpop/rpop/llen) and ngx.on_abort, against Debian's nginx
// 1.22 + libnginx-mod-http-lua 0.10.23 on the same configuration.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { logged, luaPair, same } from './hooks-kit.ts';
import type { RunningServer } from '../kit/server.ts';

const pair = await luaPair({ after }, `
    lua_shared_dict q 1m;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /list {
            content_by_lua_block {
                local d = ngx.shared.q
                d:flush_all()
                ngx.say("push ", d:rpush("l", "b"), " ", d:rpush("l", 3.5), " ", d:lpush("l", "a\\0z"), " ", d:llen("l"))
                ngx.say("lpop ", d:lpop("l") == "a\\0z", " rpop ", d:rpop("l"), " llen ", d:llen("l"))
                ngx.say("last ", d:lpop("l"), " gone ", tostring(d:get("l")), " ", tostring(d:lpop("l")), " ", d:llen("l"))
                d:set("s", "str")
                ngx.say("not list ", table.concat({tostring(d:lpush("s", 1)), select(2, d:lpush("s", 1))}, " "),
                    " ", select(2, d:llen("s")), " ", select(2, d:rpop("s")))
                d:rpush("l2", 1)
                ngx.say("is list ", table.concat({tostring(d:get("l2")), select(2, d:get("l2"))}, " "), " ", select(2, d:incr("l2", 1)))
                ngx.say("bad ", select(2, d:rpush("l3", {})), " ", select(2, d:lpush("l3", nil)), " ", select(2, d:rpush(nil, 1)))
                d:set("l2", "replaced")
                ngx.say("set over ", d:get("l2"))
            }
        }
        location /off {
            content_by_lua_block {
                ngx.say(table.concat({tostring(ngx.on_abort(function() end)), select(2, ngx.on_abort(function() end))}, " "))
            }
        }
        location /abort {
            lua_check_client_abort on;
            content_by_lua_block {
                ngx.say(ngx.on_abort(function() ngx.log(ngx.NOTICE, "client went away") ngx.exit(499) end))
                ngx.say(select(2, ngx.on_abort(function() end)))
                ngx.flush(true)
                ngx.sleep(0.5)
                ngx.log(ngx.NOTICE, "not aborted")
            }
        }
        location /abort-quiet {
            lua_check_client_abort on;
            content_by_lua_block {
                ngx.say("first")
                ngx.flush(true)
                ngx.sleep(0.3)
                ngx.say("second")
            }
        }
    }
`);

test('lists: push, pop, length, the emptied key goes, OpenResty\'s errors', async () => {
  const r = await same(pair, '/list');
  assert.equal(r.body, [
    'push 1 2 3 3',
    'lpop true rpop 3.5 llen 1',
    'last b gone nil nil 0',
    'not list nil value not a list value not a list value not a list',
    'is list nil value is a list not a number',
    'bad bad value type bad value type nil key',
    'set over replaced',
    '',
  ].join('\n'));
});

test('ngx.on_abort without lua_check_client_abort', async () => {
  assert.equal((await same(pair, '/off')).body, 'nil lua_check_client_abort is off\n');
});

/** Sends a request for /abort, reads the first chunk, then half-closes the connection. */
async function abortOn(srv: RunningServer): Promise<string> {
  const sock = net.connect(srv.port(8080), '127.0.0.1');
  let got = '';
  await new Promise<void>((resolve) => {
    sock.on('data', (d) => {
      got += d.toString('latin1');
      if (got.includes('duplicate call')) resolve();
    });
    sock.write('GET /abort HTTP/1.1\r\nHost: localhost\r\n\r\n');
  });
  sock.end();
  await logged(srv, /client went away/);
  sock.destroy();
  return got.slice(got.indexOf('\r\n\r\n') + 4);
}

test('ngx.on_abort: the function runs when the client closes, once only', async () => {
  for (const srv of [pair.gh, pair.ng]) {
    if (!srv) continue;
    const body = await abortOn(srv);
    // the chunks differ (Gatehouse holds ngx.say's output until the flush, docs/lua.md): their text is the same
    assert.equal(body.replace(/(^|\r\n)[0-9a-f]+\r\n/g, ''), '1\nduplicate call\n\r\n');
    const lines = await logged(srv, /client went away/);
    assert.match(lines[0], /^\[notice\] \[lua\] content_by_lua\(nginx\.conf:\d+\):2: client went away, client: 127\.0\.0\.1, server: , request: "GET \/abort HTTP\/1\.1", host: "localhost"$/);
    // nginx says why first, with an ngx.on_abort function too
    assert.equal((await logged(srv, /prematurely closed.*GET \/abort HTTP/)).length, 1);
  }
});

test('lua_check_client_abort without ngx.on_abort: the request ends when the client half-closes', async () => {
  for (const srv of [pair.gh, pair.ng]) {
    if (!srv) continue;
    const sock = net.connect(srv.port(8080), '127.0.0.1');
    let got = '';
    const closed = new Promise<void>((resolve) => {
      sock.on('data', (d) => {
        got += d.toString('latin1');
        if (got.includes('first')) sock.end();
      });
      sock.on('close', () => resolve());
    });
    sock.write('GET /abort-quiet HTTP/1.1\r\nHost: localhost\r\n\r\n');
    await closed;
    assert.match(got, /first\n/);
    assert.doesNotMatch(got, /second/);
    assert.match((await logged(srv, /prematurely closed.*abort-quiet/))[0],
      /^\[info\] client prematurely closed connection, client: 127\.0\.0\.1, server: , request: "GET \/abort-quiet HTTP\/1\.1", host: "localhost"$/);
  }
});
