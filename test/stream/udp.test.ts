// UDP in stream: `listen … udp` with `return` and with `proxy_pass` to a
// UDP peer, the end of a session by proxy_responses, proxy_requests and
// proxy_timeout, and what the access and error logs say. Reference: the
// same configuration on Debian's nginx 1.22; the client must receive the
// same datagrams and the logs hold the same lines.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { flavors, logLines, normalise, waitForLines } from './stream-kit.ts';

const conf = (echo: number, syslog: number) => `
events {}
stream {
    log_format u '$protocol $status $bytes_sent $bytes_received "$upstream_addr" "$upstream_bytes_sent" "$upstream_bytes_received" $server_port';
    access_log %%PREFIX%%/u.log u;
    error_log %%PREFIX%%/udp.log info;
    proxy_timeout 1s;

    server {
        listen 127.0.0.1:%%PORT_8091_UDP%% udp;
        return "hello $remote_addr $protocol";
        error_log syslog:server=127.0.0.1:${syslog},tag=udp info;
    }
    server {
        listen 127.0.0.1:%%PORT_8092_UDP%% udp;
        proxy_pass 127.0.0.1:${echo};
        proxy_responses 1;
    }
    server {
        listen 127.0.0.1:%%PORT_8093_UDP%% udp;
        proxy_pass 127.0.0.1:${echo};
        proxy_requests 2;
        proxy_responses 1;
    }
    server {
        listen 127.0.0.1:%%PORT_8094_UDP%% udp;
        proxy_pass 127.0.0.1:${echo};
    }
}
`;

/** A UDP client: sends datagrams and collects what comes back. */
async function udpClient(): Promise<{ send(port: number, text: string): void; next(): Promise<string>; close(): void }> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', () => r()));
  const got: string[] = [];
  let waiter: (() => void) | undefined;
  s.on('message', (m) => { got.push(m.toString('latin1')); waiter?.(); });
  return {
    send: (port, text) => s.send(text, port, '127.0.0.1'),
    async next() {
      while (got.length === 0) await new Promise<void>((r) => { waiter = r; });
      return got.shift()!;
    },
    close: () => s.close(),
  };
}

const observed = new Map<string, Record<string, unknown>>();

// one echo peer for both runs (its port is in the logs)
const echo = dgram.createSocket('udp4');
echo.on('message', (m, from) => echo.send(m.toString('latin1').toUpperCase(), from.port, from.address));
await new Promise<void>((r) => echo.bind(0, '127.0.0.1', () => r()));
test.after(() => echo.close());
// and one syslog receiver for the error_log syslog: lines
const syslog = dgram.createSocket('udp4');
const syslogLines: string[] = [];
let onSyslog: (() => void) | undefined;
syslog.on('message', (m) => { syslogLines.push(m.toString('latin1')); onSyslog?.(); });
await new Promise<void>((r) => syslog.bind(0, '127.0.0.1', () => r()));
test.after(() => syslog.close());

for (const flavor of flavors) {
  test(`stream UDP (${flavor.name})`, { skip: flavor.skip }, async (t) => {
    syslogLines.length = 0;
    const srv = await flavor.start({ conf: conf(echo.address().port, syslog.address().port) });
    t.after(() => srv.stop());
    const out: Record<string, unknown> = {};
    observed.set(flavor.name, out);
    const port = (n: number) => srv.port(n, true);
    const names = { U1: port(8091), U2: port(8092), U3: port(8093), U4: port(8094), ECHO: echo.address().port };

    await t.test('return answers a datagram with one datagram', async () => {
      const c = await udpClient();
      t.after(() => c.close());
      c.send(port(8091), 'x');
      assert.equal(await c.next(), 'hello 127.0.0.1 UDP');
    });

    await t.test('error_log syslog: a datagram per line, at the line\'s severity', async () => {
      while (!syslogLines.some((l) => l.includes('connected to'))) await new Promise<void>((r) => { onSyslog = r; });
      out.syslog = syslogLines.filter((l) => l.includes('connected to')).map((l) => normalise(l, names)
        .replace(/^<(\d+)>\w{3} [ \d]\d \d\d:\d\d:\d\d \S+ /, '<$1>TIME HOST ')
        .replace(/\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[(\w+)\] \d+#\d+: \*\d+ /, 'LOGTIME [$1] PID: '));
      assert.deepEqual(out.syslog, ['<190>TIME HOST udp: LOGTIME [info] PID: udp client 127.0.0.1:CPORT connected to 127.0.0.1:U1']);
    });

    await t.test('proxy_responses 1: a session per datagram', async () => {
      const c = await udpClient();
      t.after(() => c.close());
      c.send(port(8092), 'one');
      assert.equal(await c.next(), 'ONE');
      c.send(port(8092), 'two');
      assert.equal(await c.next(), 'TWO');
    });

    await t.test('proxy_requests 2: two datagrams of one client make one session', async () => {
      const c = await udpClient();
      t.after(() => c.close());
      c.send(port(8093), 'a');
      assert.equal(await c.next(), 'A');
      c.send(port(8093), 'bb');
      assert.equal(await c.next(), 'BB');
    });

    await t.test('without proxy_responses the session ends at proxy_timeout', async () => {
      const c = await udpClient();
      t.after(() => c.close());
      c.send(port(8094), 'zz');
      assert.equal(await c.next(), 'ZZ');
    });

    const lines = await waitForLines(srv, 'u.log', 5, 10_000);
    out.access = lines.map((l) => normalise(l, names).replace(/ (\d+)$/, (m, p: string) => ` ${Object.entries(names).find(([, v]) => String(v) === p)?.[0] ?? p}`)).sort();
    assert.deepEqual(out.access, [
      'UDP 200 19 1 "-" "-" "-" U1',
      'UDP 200 2 2 "127.0.0.1:ECHO" "2" "2" U4',
      'UDP 200 3 3 "127.0.0.1:ECHO" "3" "3" U2',
      'UDP 200 3 3 "127.0.0.1:ECHO" "3" "3" U2',
      'UDP 200 3 3 "127.0.0.1:ECHO" "3" "3" U3',
    ]);
    out.error = logLines(srv, /udp (done|timed out|client)/, names, 'udp.log').sort();
    assert.ok((out.error as string[]).includes('[info] udp timed out, packets from/to client:1/1, bytes from/to client:2/2, bytes from/to upstream:2/2'));
  });
}

test('Gatehouse saw what nginx saw', { skip: flavors[1].skip }, () => {
  const g = observed.get('gatehouse');
  const n = observed.get('nginx');
  assert.ok(g && n, 'both runs completed');
  assert.deepEqual(g, n);
});
