// A cosocket belongs to its own request: another request ending (while this one still waits on
// its socket) leaves it open, and keepalive pools are shared by requests running side by side.
// Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23 on the same configuration.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { ask, luaPair } from './hooks-kit.ts';
import type { Seen } from './hooks-kit.ts';
import type { RunningServer } from '../kit/server.ts';

/** Answers nothing until it is told `go`, then `gone` to every connection waiting. */
const waiting = new Set<net.Socket>();
let connected: () => void = () => {};
const silent = net.createServer((c) => {
  c.on('error', () => {});
  waiting.add(c);
  c.on('close', () => waiting.delete(c));
  connected();
});
await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
after(() => silent.close());
const silentPort = (silent.address() as net.AddressInfo).port;

let accepted = 0;
const pong = net.createServer((c) => {
  accepted++;
  c.on('error', () => {});
  c.on('data', () => c.write('+PONG\r\n'));
});
await new Promise<void>((resolve) => pong.listen(0, '127.0.0.1', resolve));
after(() => pong.close());
const pongPort = (pong.address() as net.AddressInfo).port;

const pair = await luaPair({ after }, `
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /hold {
            content_by_lua_block {
                local sock = ngx.socket.tcp()
                sock:settimeout(5000)
                assert(sock:connect("127.0.0.1", ${silentPort}))
                ngx.say(sock:receive())
            }
        }
        location /quick {
            content_by_lua_block {
                local sock = ngx.socket.tcp()
                assert(sock:connect("127.0.0.1", ${silentPort}))
                ngx.say("quick")
            }
        }
        location /ping {
            content_by_lua_block {
                local sock = ngx.socket.tcp()
                assert(sock:connect("127.0.0.1", ${pongPort}))
                sock:send("PING\\r\\n")
                ngx.say(sock:receive(), " ", sock:setkeepalive())
            }
        }
    }
`);

const servers: Array<[string, RunningServer | undefined]> = [['Gatehouse', pair.gh], ['nginx', pair.ng]];
for (const [name, srv] of servers) {
  test(`${name}: another request ending does not close this one's socket`, async (t) => {
    if (!srv) return t.skip('no nginx');
    // the held request is connected and waiting before the quick one starts and ends
    const holding = new Promise<void>((resolve) => { connected = resolve; });
    const held = ask(srv, '/hold');
    await holding;
    assert.equal((await ask(srv, '/quick')).body, 'quick\n');
    for (const c of waiting) c.end('gone\n');
    assert.equal((await held).body, 'gone\n');
  });

  test(`${name}: requests side by side share the keepalive pool`, async (t) => {
    if (!srv) return t.skip('no nginx');
    const start = accepted;
    for (let round = 0; round < 5; round++) {
      const bodies: Seen[] = await Promise.all([1, 2, 3].map(() => ask(srv, '/ping')));
      for (const b of bodies) assert.equal(b.body, '+PONG 1\n');
    }
    assert.ok(accepted - start <= 3, `${accepted - start} connections for 3 at a time`);
  });
}
