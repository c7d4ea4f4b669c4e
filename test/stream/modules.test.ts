// The stream modules around the proxy: return, map, allow/deny, access_log
// (formats, escaping, if=, off) and error_log at stream and server level.
// Reference: the same configuration runs on Debian's nginx 1.22 and the
// client must read the same bytes and the logs hold the same lines.

import { test } from 'node:test';
import dgram from 'node:dgram';
import assert from 'node:assert/strict';
import { converse, flavors, logLines, startBackend, upperEcho, waitForLines } from './stream-kit.ts';

const conf = (echo: number, syslog: number) => `
events {}
stream {
    log_format plain '$server_port $status $bytes_sent $protocol $remote_addr $server_addr "$upstream_addr"';
    log_format esc '[$greeting]';
    log_format json escape=json '{"g":"$greeting","u":"$upstream_addr"}';
    access_log %%PREFIX%%/all.log plain;

    map $server_port $greeting {
        %%PORT_8081%%   "hi \\"there\\"";
        ~^(\\d)\\d+$    "digit $1";
    }

    server {
        listen 127.0.0.1:%%PORT_8081%%;
        return "$greeting from $remote_addr\\n";
        access_log %%PREFIX%%/esc.log esc;
        access_log %%PREFIX%%/json.log json;
    }
    server {
        listen 127.0.0.1:%%PORT_8082%%;
        return "$greeting\\n";
        access_log %%PREFIX%%/all.log plain if=$greeting;
        access_log syslog:server=127.0.0.1:${syslog},tag=stream,nohostname esc;
    }
    server {
        listen 127.0.0.1:%%PORT_8083%%;
        deny 127.0.0.1;
        allow all;
        proxy_pass 127.0.0.1:${echo};
        error_log %%PREFIX%%/denied.log;
    }
    server {
        listen 127.0.0.1:%%PORT_8084%%;
        allow 127.0.0.0/8;
        deny all;
        proxy_pass 127.0.0.1:${echo};
        access_log off;
    }
    server {
        listen 127.0.0.1:%%PORT_8085%% proxy_protocol;
        return "$proxy_protocol_addr:$proxy_protocol_port $proxy_protocol_server_addr:$proxy_protocol_server_port $remote_addr\n";
    }
    server {
        listen 127.0.0.1:%%PORT_8086%% proxy_protocol;
        proxy_pass 127.0.0.1:${echo};
    }
}
`;

/** A PROXY protocol v2 header for TCP over IPv4 from 127.0.0.1:1111 to 127.0.0.1:2222. */
function proxyV2(): string {
  const body = Buffer.from([127, 0, 0, 1, 127, 0, 0, 1, 0x04, 0x57, 0x08, 0xae]);
  const head = Buffer.concat([Buffer.from('\r\n\r\n\0\r\nQUIT\n', 'latin1'), Buffer.from([0x21, 0x11, 0, body.length])]);
  return Buffer.concat([head, body]).toString('latin1');
}

const observed = new Map<string, Record<string, unknown>>();

for (const flavor of flavors) {
  test(`stream modules (${flavor.name})`, { skip: flavor.skip }, async (t) => {
    const echo = await startBackend(upperEcho);
    t.after(() => echo.close());
    const syslog = dgram.createSocket('udp4');
    const datagrams: string[] = [];
    syslog.on('message', (m) => datagrams.push(m.toString('latin1')));
    await new Promise<void>((r) => syslog.bind(0, '127.0.0.1', () => r()));
    t.after(() => syslog.close());
    const srv = await flavor.start({ conf: conf(echo.port, syslog.address().port) });
    t.after(() => srv.stop());
    const out: Record<string, unknown> = {};
    observed.set(flavor.name, out);
    const names = { P1: srv.port(8081), P2: srv.port(8082), P3: srv.port(8083), P4: srv.port(8084), P5: srv.port(8085), P6: srv.port(8086), ECHO: echo.port };
    const digit = String(srv.port(8082))[0];

    await t.test('return sends a value made of variables and a map, then closes', async () => {
      const r = await converse(srv.port(8081), []);
      assert.deepEqual(r, { data: 'hi "there" from 127.0.0.1\n', end: 'fin' });
    });

    await t.test('a map regex capture reaches the value', async () => {
      const r = await converse(srv.port(8082), []);
      assert.deepEqual(r, { data: `digit ${digit}\n`, end: 'fin' });
    });

    await t.test('access_log to syslog: one datagram per session', async () => {
      for (let i = 0; i < 50 && datagrams.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      out.syslog = datagrams.map((d) => d.replace(/^(<\d+>)\w{3} [ \d]\d \d\d:\d\d:\d\d /, '$1TIME ').replace(`digit ${digit}`, 'digit D'));
      assert.deepEqual(out.syslog, ['<190>TIME stream: [digit D]']);
    });

    await t.test('deny closes the connection before proxying', async () => {
      const before = echo.accepted;
      const r = await converse(srv.port(8083), [{ send: 'x' }]);
      assert.equal(r.data, '');
      assert.notEqual(r.end, 'open');
      assert.equal(echo.accepted, before);
    });

    await t.test('allow lets the client through', async () => {
      const r = await converse(srv.port(8084), [{ send: 'ok', until: 2 }, { fin: true }]);
      assert.deepEqual(r, { data: 'OK', end: 'fin' });
    });

    await t.test('listen proxy_protocol: the addresses of a v1 header', async () => {
      const r = await converse(srv.port(8085), [{ send: 'PROXY TCP6 ::1 ::1 1111 2222\r\n' }]);
      assert.deepEqual(r, { data: '::1:1111 ::1:2222 127.0.0.1\n', end: 'fin' });
    });

    await t.test('listen proxy_protocol: a v2 header', async () => {
      const r = await converse(srv.port(8085), [{ send: proxyV2() }]);
      assert.deepEqual(r, { data: '127.0.0.1:1111 127.0.0.1:2222 127.0.0.1\n', end: 'fin' });
    });

    await t.test('listen proxy_protocol: what follows the header is proxied', async () => {
      const r = await converse(srv.port(8086), [{ send: 'PROXY UNKNOWN\r\nhello', until: 5 }, { fin: true }]);
      assert.deepEqual(r, { data: 'HELLO', end: 'fin' });
    });

    await t.test('listen proxy_protocol: a broken header ends the session', async () => {
      const r = await converse(srv.port(8085), [{ send: 'HELLO\r\n' }]);
      assert.equal(r.data, '');
      assert.notEqual(r.end, 'open');
    });

    // servers with access_log lines of their own (or off) do not inherit the stream level's
    const all = await waitForLines(srv, 'all.log', 6);
    out.all = all.map((l) => l.replace(/^\d+/, (p) => Object.entries(names).find(([, v]) => String(v) === p)?.[0] ?? p)
      .replace(`:${echo.port}`, ':ECHO')).sort();
    assert.deepEqual(out.all, [
      `P2 200 ${`digit ${digit}\n`.length} TCP 127.0.0.1 127.0.0.1 "-"`,
      'P3 403 0 TCP 127.0.0.1 127.0.0.1 "-"',
      'P5 200 28 TCP 127.0.0.1 127.0.0.1 "-"',
      'P5 200 40 TCP 127.0.0.1 127.0.0.1 "-"',
      'P5 400 0 TCP 127.0.0.1 127.0.0.1 "-"',
      'P6 200 5 TCP 127.0.0.1 127.0.0.1 "127.0.0.1:ECHO"',
    ].sort());
    // the header is logged as received, so the line breaks where it did
    out.broken = logLines(srv, /broken header|while reading PROXY/, names);
    assert.deepEqual(out.broken, ['[error] broken header: "HELLO\r', '" while reading PROXY protocol, client: 127.0.0.1, server: 127.0.0.1:P5']);
    out.esc = await waitForLines(srv, 'esc.log', 1);
    assert.deepEqual(out.esc, ['[hi \\x22there\\x22]']);
    out.json = await waitForLines(srv, 'json.log', 1);
    assert.deepEqual(out.json, ['{"g":"hi \\"there\\"","u":""}']);

    out.denied = logLines(srv, /forbidden/, names, 'denied.log');
    assert.deepEqual(out.denied, ['[error] access forbidden by rule while initializing session, client: 127.0.0.1, server: 127.0.0.1:P3']);
    // the server's own error_log takes its lines: the main log has none
    assert.deepEqual(logLines(srv, /forbidden/, names), []);
  });
}

test('Gatehouse saw what nginx saw', { skip: flavors[1].skip }, () => {
  const g = observed.get('gatehouse');
  const n = observed.get('nginx');
  assert.ok(g && n, 'both runs completed');
  assert.deepEqual(g, n);
});
