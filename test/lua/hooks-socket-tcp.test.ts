// ngx.socket.tcp (cosockets) against small loopback servers this file runs: a command server that
// answers in lines, sizes, pieces, a multipart-like body or not at all, an echo, a redis-protocol
// responder, and a closed port. Reference: Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23
// on the same configuration; both servers connect to the same loopback servers.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { ask, logged, luaPair, same, sameLog } from './hooks-kit.ts';
import type { Pair } from '../kit/pair.ts';
import { freePort } from '../kit/server.ts';

/** A TCP server on loopback whose connections `serve` handles; closed after the tests. */
async function tcpServer(serve: (c: net.Socket) => void): Promise<number> {
  const srv = net.createServer(serve);
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  after(() => srv.close());
  return (srv.address() as net.AddressInfo).port;
}

/** Reads the first line a client sends, then `answer(command, socket)`. */
function commands(answer: (cmd: string, c: net.Socket) => void): (c: net.Socket) => void {
  return (c) => {
    let got = '';
    const onData = (d: Buffer) => {
      got += d.toString('latin1');
      const nl = got.indexOf('\n');
      if (nl < 0) return;
      c.off('data', onData);
      answer(got.slice(0, nl), c);
    };
    c.on('data', onData);
    c.on('error', () => {});
  };
}

let connections = 0;

const cmdPort = await tcpServer(commands((cmd, c) => {
    switch (cmd) {
      case 'lines': c.end('one\r\ntwo\nth\rree\nlast'); break;
      case 'size':
        c.write('abc');
        setImmediate(() => c.write('defghij'));
        break;
      case 'all':
        c.write('x'.repeat(5000));
        setImmediate(() => c.end('y'.repeat(5000)));
        break;
      case 'multipart':
        c.write('preamble\r\n--BOUND\r\npart one\r\n--BO');
        setImmediate(() => c.end('UND\r\npart two is longer\r\n--BOUND--\r\n'));
        break;
      case 'stall': c.write('partial'); break;
      case 'any':
        c.write('12345');
        break;
      case 'big': c.end('z'.repeat(10000)); break;
    }
  }));
  // a tiny redis: every PING (inline or as an array) is +PONG; counts connections
const redisPort = await tcpServer((c) => {
    connections++;
    let buf = '';
    c.on('data', (d) => {
      buf += d.toString('latin1');
      for (;;) {
        const m = /^(\*1\r\n\$4\r\nPING\r\n|PING\r\n)/.exec(buf);
        if (!m) break;
        buf = buf.slice(m[0].length);
        c.write('+PONG\r\n');
      }
    });
    c.on('error', () => {});
  });
const echoPort = await tcpServer((c) => {
  c.on('error', () => {});
  c.pipe(c);
});
const closedPort = await freePort();
const pair: Pair = await luaPair({ after }, `
    lua_shared_dict results 64k;
    # what timers use (no read in this file waits for it otherwise)
    lua_socket_read_timeout 1s;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /lines {
            content_by_lua_block {
                local sock = ngx.socket.tcp()
                local ok, err = sock:connect("127.0.0.1", ${cmdPort})
                ngx.say("connect: ", ok, " ", err)
                ngx.say("sent: ", sock:send("lines\\n"))
                ngx.say("1: ", sock:receive())
                ngx.say("2: ", sock:receive("*l"))
                ngx.say("3: ", sock:receive("*l"))
                local data, err, partial = sock:receive()
                ngx.say("4: ", data, " ", err, " [", partial, "]")
                ngx.say("5: ", sock:receive())
                ngx.say("close: ", sock:close())
                ngx.say("again: ", sock:close())
            }
        }
        location /size {
            content_by_lua_block {
                local sock = ngx.socket.tcp()
                sock:settimeout(200)
                assert(sock:connect("127.0.0.1", ${cmdPort}))
                sock:send({ "si", { "z", "e" }, "\\n" })
                ngx.say(sock:receive(4))
                ngx.say(sock:receive(0) == "")
                ngx.say(sock:receive(6))
                sock:settimeouts(1000, 1000, 50)
                local data, err, partial = sock:receive(1)
                ngx.say(data, " ", err, " [", partial, "]")
                sock:close()
            }
        }
        location /all {
            content_by_lua_block {
                local sock = ngx.socket.tcp()
                assert(sock:connect("127.0.0.1", ${cmdPort}))
                sock:send("all\\n")
                local data, err = sock:receive("*a")
                ngx.say(#data, " ", err, " ", data:sub(4999, 5002))
                ngx.say(sock:receive("*a"))
            }
        }
        location /any {
            content_by_lua_block {
                local sock = ngx.socket.tcp()
                assert(sock:connect("127.0.0.1", ${cmdPort}))
                sock:send("any\\n")
                ngx.say(sock:receiveany(3))
                ngx.say(sock:receiveany(10))
                sock:close()
            }
        }
        location /any-big {
            lua_socket_buffer_size 1k;
            content_by_lua_block {
                local sock = ngx.socket.tcp()
                assert(sock:connect("127.0.0.1", ${cmdPort}))
                sock:send("big\\n")
                local got = assert(sock:receive(1))
                while true do
                    local data, err = sock:receiveany(10000)
                    if not data then break end
                    assert(#data <= 1024, #data)
                    got = got .. data
                end
                ngx.say(#got)
            }
        }
        location /multipart {
            content_by_lua_block {
                local sock = ngx.socket.tcp()
                assert(sock:connect("127.0.0.1", ${cmdPort}))
                sock:send("multipart\\n")
                local until_boundary = sock:receiveuntil("\\r\\n--BOUND")
                ngx.say("preamble: [", until_boundary(), "]")
                ngx.say("line: [", sock:receive(), "]")
                ngx.say("part: [", until_boundary(), "]")
                ngx.say("line: [", sock:receive(), "]")
                while true do
                    local data, err, partial = until_boundary(5)
                    if not data then
                        ngx.say("end: ", err, " ", partial)
                        break
                    end
                    ngx.say("piece: [", data, "]")
                end
                local rest = sock:receiveuntil("--", { inclusive = true })
                ngx.say("inclusive: [", rest(), "]")
                local data, err, partial = rest()
                ngx.say("closed: ", data, " ", err, " [", partial, "]")
            }
        }
        location /stall {
            content_by_lua_block {
                local sock = ngx.socket.tcp()
                -- a pool of its own: the stalled connection is not reused by the tests after
                assert(sock:connect("127.0.0.1", ${cmdPort}, { pool = "stalled" }))
                sock:send("stall\\n")
                sock:settimeout(50)
                local data, err, partial = sock:receive()
                ngx.say(data, " ", err, " [", partial, "]")
                ngx.say("keepalive: ", sock:setkeepalive())
                sock:close()
            }
        }
        location /refused {
            content_by_lua_block {
                local sock = ngx.socket.tcp()
                ngx.say(sock:connect("127.0.0.1", ${closedPort}))
                ngx.say(sock:send("x"))
                ngx.say(sock:receive())
                ngx.say(sock:connect("no.such.name.invalid", 80))
                ngx.say(pcall(sock.connect, sock, "127.0.0.1", 80, { pool_size = 0 }))
                ngx.say(ngx.socket.connect("127.0.0.1", ${closedPort}))
            }
        }
        location /redis {
            content_by_lua_block {
                local function ping()
                    local sock = ngx.socket.tcp()
                    assert(sock:connect("127.0.0.1", ${redisPort}))
                    local reused = sock:getreusedtimes()
                    sock:send("*1\\r\\n$4\\r\\nPING\\r\\n")
                    local line = sock:receive()
                    ngx.say(line, " reused ", reused, " keepalive ", sock:setkeepalive(10000, 10))
                    ngx.say(sock:send("x"))
                end
                ping()
                ping()
                ping()
            }
        }
        location /threads {
            content_by_lua_block {
                local function ping(n)
                    local sock = ngx.socket.tcp()
                    assert(sock:connect("127.0.0.1", ${redisPort}, { pool = "threads" }))
                    sock:send("PING\\r\\n")
                    return n .. " " .. sock:receive()
                end
                local a = ngx.thread.spawn(ping, 1)
                local b = ngx.thread.spawn(ping, 2)
                ngx.say(select(2, ngx.thread.wait(a)))
                ngx.say(select(2, ngx.thread.wait(b)))
            }
        }
        location /echo {
            content_by_lua_block {
                local sock = ngx.socket.tcp()
                assert(sock:connect("127.0.0.1", ${echoPort}))
                ngx.say("sent ", sock:send({ "a", 1, { 2.5, "b" }, "\\n" }))
                ngx.say(sock:receive())
                ngx.say(pcall(sock.send, sock, { "a", true }))
                sock:close()
            }
        }
        location /log {
            content_by_lua_block { ngx.say("ok") }
            log_by_lua_block {
                local ok, err = pcall(ngx.socket.tcp)
                ngx.log(ngx.WARN, "in log: ", err)
            }
        }
        location /header {
            content_by_lua_block { ngx.say("ok") }
            header_filter_by_lua_block {
                local ok, err = pcall(ngx.socket.tcp)
                ngx.header["X-Err"] = err
            }
        }
        location /edges {
            content_by_lua_block {
                local function show(...)
                    local out = {}
                    for i = 1, select("#", ...) do out[i] = tostring((select(i, ...))) end
                    ngx.say(table.concat(out, " "))
                end
                local sock = ngx.socket.tcp()
                show(sock:receive())
                show(sock:connect("localhost", ${redisPort}))
                show(pcall(sock.settimeout, sock, -1))
                show(sock:connect("127.0.0.1", ${cmdPort}, { pool = "named", pool_size = 2 }))
                show(pcall(sock.receive, sock, "*x"))
                show(pcall(sock.receiveany, sock, 0))
                sock:send("lines\\n")
                show(sock:receive(2))
                show(sock:receive("*a"))
                show(sock:setkeepalive())
                assert(sock:connect("127.0.0.1", ${cmdPort}))
                sock:send("size\\n")
                show(sock:receive(2))
                show(sock:setkeepalive())
                sock:close()
                show(sock:connect("unix:/nonexistent/gatehouse-test.sock"))
                show(sock:connect("127.0.0.1"))
                show(sock:connect("127.0.0.1", 70000))
                show(sock:connect("127.0.0.1", tostring(${redisPort})))
                show(sock:connect("UNIX:/nonexistent/x.sock", 80))
                local u = ngx.socket.udp()
                show(u:setpeername("localhost", 53))
                show(u:receive())
            }
        }
        location /timer-timeout {
            content_by_lua_block {
                ngx.timer.at(0, function()
                    local sock = ngx.socket.tcp()
                    assert(sock:connect("127.0.0.1", ${cmdPort}, { pool = "timer-stalled" }))
                    sock:send("stall\\n")
                    local data, err, partial = sock:receive()
                    ngx.shared.results:set("timer", err .. " " .. partial)
                end)
                ngx.say("started")
            }
        }
        location /timer-result {
            content_by_lua_block { ngx.say(ngx.shared.results:get("timer")) }
        }
        location /nolog {
            lua_socket_log_errors off;
            content_by_lua_block {
                local sock = ngx.socket.tcp()
                ngx.say(sock:connect("127.0.0.1", ${closedPort}))
            }
        }
    }
`);

test('receive: lines (CR dropped), then nil, "closed" and the partial line', async () => {
  const r = await same(pair, '/lines');
  assert.equal(r.body, 'connect: 1 nil\nsent: 6\n1: one\n2: two\n3: three\n4: nil closed [last]\n5: nilclosed\nclose: 1\nagain: nilclosed\n');
});

test('receive(size) across pieces, send of a nested table, and a read timeout with the partial data', async () => {
  const r = await same(pair, '/size');
  assert.equal(r.body, 'abcd\ntrue\nefghij\nnil timeout []\n');
  const lines = await sameLog(pair, /lua tcp socket read timed out/);
  assert.match(lines[0], /^\[error\] lua tcp socket read timed out, client: 127\.0\.0\.1/);
});

test('receive("*a") reads until the peer closes; receiveany', async () => {
  assert.equal((await same(pair, '/all')).body, '10000 nil xxyy\n\n');
  assert.equal((await same(pair, '/any')).body, '123\n45\n');
  assert.equal((await same(pair, '/any-big')).body, '10000\n');
});

test('receiveuntil with a multipart boundary, with sizes, inclusive, and closed', async () => {
  const r = await same(pair, '/multipart');
  assert.match(r.body, /^preamble: \[preamble\]\nline: \[\]\npart: \[part one\]\n/);
});

test('a read timeout keeps partial data and spoils keepalive', async () => {
  const r = await same(pair, '/stall');
  assert.equal(r.body, 'nil timeout [partial]\nkeepalive: 1\n');
});

test('connect refused, names without a resolver, bad options', async () => {
  const r = await same(pair, '/refused');
  assert.match(r.body, /^nilconnection refused\nnilclosed\nnilclosed\nnilno resolver defined to resolve "no.such.name.invalid"\n/);
  const lines = await sameLog(pair, /connect\(\) failed/);
  assert.match(lines[0], /^\[error\] connect\(\) failed \(111: Connection refused\)/);
  // OpenResty's pointers are its own: compared without them
  const closedUse = async (srv: typeof pair.gh) => (await logged(srv, /on a closed socket.*refused/))
    .map((l) => l.replace(/u:\w+, c:\w+/, 'u:U, c:C'));
  const gh = await closedUse(pair.gh);
  if (pair.ng) assert.deepEqual(gh, await closedUse(pair.ng));
  assert.match(gh[0], /^\[error\] attempt to send data on a closed socket: u:U, c:C, ft:0 eof:0, client: 127\.0\.0\.1/);
});

test('setkeepalive pools the connection: getreusedtimes 0, then 1, 2; a kept socket is closed', async () => {
  const before = connections;
  const r = await same(pair, '/redis');
  assert.equal(r.body, '+PONG reused 0 keepalive 1\nnilclosed\n+PONG reused 1 keepalive 1\nnilclosed\n+PONG reused 2 keepalive 1\nnilclosed\n');
  assert.ok(connections - before <= 2, 'one connection per server');
});

test('sockets in light threads', async () => {
  assert.equal((await same(pair, '/threads')).body, '1 +PONG\n2 +PONG\n');
});

test('send counts bytes of a table; a bad element is an error', async () => {
  const r = await same(pair, '/echo');
  assert.match(r.body, /^sent 7\na12\.5b\nfalsebad argument #2 to '\?' \(bad data type boolean found\)\n$/);
});

test('cosockets are disabled in log and header_filter', async () => {
  const r = await same(pair, '/header');
  assert.deepEqual(r.headers.find(([n]) => n === 'X-Err'), ['X-Err', 'API disabled in the context of header_filter_by_lua*']);
  await same(pair, '/log');
  const lines = await sameLog(pair, /in log: /);
  assert.match(lines[0], /API disabled in the context of log_by_lua\*/);
});

test('edges: names without a resolver, bad arguments, unread data, a closed peer', async () => {
  const r = await same(pair, '/edges');
  assert.match(r.body, /^nil closed\nnil no resolver defined to resolve "localhost"\n/);
  await sameLog(pair, /connect\(\) to unix:\/nonexistent/);
});

test('a timer\'s socket has the http block\'s lua_socket_read_timeout', async () => {
  await same(pair, '/timer-timeout');
  for (const srv of [pair.gh, pair.ng]) {
    if (!srv) continue;
    const deadline = Date.now() + 10_000;
    let body = '';
    while (Date.now() < deadline && body !== 'timeout partial\n') body = (await ask(srv, '/timer-result')).body;
    assert.equal(body, 'timeout partial\n');
  }
  const lines = await sameLog(pair, /read timed out, context: ngx.timer/);
  assert.match(lines[0], /^\[error\] lua tcp socket read timed out, context: ngx\.timer, client: 127\.0\.0\.1, server: 127\.0\.0\.1:PORT$/);
});

test('lua_socket_log_errors off: no connect() line', async () => {
  assert.equal((await same(pair, '/nolog')).body, 'nilconnection refused\n');
});
