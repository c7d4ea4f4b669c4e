// The stream modules that work on a session's variables and limits: geo,
// split_clients, set, realip, limit_conn, and the hash / consistent hash
// balancers. Reference: the same configuration runs on Debian's nginx 1.22;
// the client reads the same bytes, the same peers are chosen for the same
// keys, and the access and error logs hold the same lines.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { converse, flavors, logLines, startBackend, waitForLines } from './stream-kit.ts';
import type { Backend } from './stream-kit.ts';

const conf = (b: Backend[], hold: number) => `
events {}
stream {
    log_format m '$server_port $status "$geo" "$range" "$who" "$limit_conn_status" $remote_addr $realip_remote_addr "$upstream_addr"';
    access_log %%PREFIX%%/m.log m;

    geo $geo {
        default        none;
        127.0.0.0/8    loopback;
        10.1.0.0/16    ten-one;
        10.1.2.0/24    ten-one-two;
    }
    geo $remote_addr $range {
        ranges;
        default                  out;
        10.1.0.0-10.1.0.255      r1;
        10.1.2.0-10.1.3.255      r2;
    }
    split_clients "$remote_addr" $part {
        30%    a;
        30%    b;
        *      c;
    }
    limit_conn_zone $server_port zone=conns:1m;

    upstream hashed {
        hash $remote_addr;
        server 127.0.0.1:${b[0].port};
        server 127.0.0.1:${b[1].port};
        server 127.0.0.1:${b[2].port};
    }
    upstream ring {
        hash $remote_addr consistent;
        server 127.0.0.1:${b[0].port};
        server 127.0.0.1:${b[1].port};
        server 127.0.0.1:${b[2].port};
    }

    server {
        listen 127.0.0.1:%%PORT_8081%%;
        set $who "$geo/$protocol";
        return "$geo $range $part $who\\n";
    }
    server {
        listen 127.0.0.1:%%PORT_8082%% proxy_protocol;
        set_real_ip_from 127.0.0.1;
        set $who $part;
        return "$remote_addr:$remote_port $realip_remote_addr $geo $range $who\\n";
    }
    server {
        listen 127.0.0.1:%%PORT_8083%%;
        limit_conn conns 1;
        proxy_pass 127.0.0.1:${hold};
    }
    server {
        listen 127.0.0.1:%%PORT_8084%% proxy_protocol;
        set_real_ip_from 127.0.0.0/8;
        proxy_pass hashed;
    }
    server {
        listen 127.0.0.1:%%PORT_8085%% proxy_protocol;
        set_real_ip_from 127.0.0.0/8;
        proxy_pass ring;
    }
    server {
        listen 127.0.0.1:%%PORT_8086%% proxy_protocol;
        # not trusted: the PROXY header's address is not taken
        set_real_ip_from 10.0.0.0/8;
        return "$remote_addr $geo\\n";
    }
}
`;

const KEYS = ['10.1.2.3', '10.1.0.7', '10.1.3.9', '10.2.0.1', '192.0.2.1', '192.0.2.77', '198.51.100.5', '203.0.113.9'];

const pp = (addr: string, port = 4000) => `PROXY TCP4 ${addr} 127.0.0.1 ${port} 80\r\n`;

const observed = new Map<string, Record<string, unknown>>();

// one set of peers for both runs: a consistent-hash ring is made of the peers' addresses
const peers = await Promise.all(['B0', 'B1', 'B2'].map((name) => startBackend((s) => s.end(name))));
test.after(() => Promise.all(peers.map((b) => b.close())));

for (const flavor of flavors) {
  test(`stream session modules (${flavor.name})`, { skip: flavor.skip }, async (t) => {
    // holds its connections open until the test is done with them
    const held: Array<() => void> = [];
    let onHeld: (() => void) | undefined;
    const hold = await startBackend((s) => { held.push(() => s.end()); onHeld?.(); });
    t.after(() => hold.close());
    const srv = await flavor.start({ conf: conf(peers, hold.port) });
    t.after(() => srv.stop());
    const out: Record<string, unknown> = {};
    observed.set(flavor.name, out);
    const names = { P1: srv.port(8081), P2: srv.port(8082), P3: srv.port(8083), P4: srv.port(8084), P5: srv.port(8085), P6: srv.port(8086) };

    await t.test('geo, ranges, split_clients and set see the client', async () => {
      const r = await converse(srv.port(8081), []);
      out.plain = r;
      assert.deepEqual(r, { data: `loopback out ${r.data.split(' ')[2]} loopback/TCP\n`, end: 'fin' });
    });

    await t.test('realip takes a trusted PROXY header\'s address for geo, split_clients and set', async () => {
      out.realip = [];
      for (const addr of KEYS) (out.realip as unknown[]).push((await converse(srv.port(8082), [{ send: pp(addr) }])).data);
      assert.equal((out.realip as string[])[0].split(' ').slice(0, 4).join(' '), '10.1.2.3:4000 127.0.0.1 ten-one-two r2');
    });

    await t.test('an untrusted PROXY header leaves the address alone', async () => {
      const r = await converse(srv.port(8086), [{ send: pp('10.1.2.3') }]);
      assert.deepEqual(r, { data: '127.0.0.1 loopback\n', end: 'fin' });
    });

    await t.test('hash and consistent hash pick peers by the key', async () => {
      const pick = async (port: number) => {
        const got: string[] = [];
        for (const addr of KEYS) got.push((await converse(port, [{ send: pp(addr) }])).data);
        return got;
      };
      out.hash = await pick(srv.port(8084));
      out.chash = await pick(srv.port(8085));
      // the same key always lands on the same peer
      assert.deepEqual(await pick(srv.port(8084)), out.hash);
      assert.ok(new Set(out.hash as string[]).size > 1, 'keys spread over the peers');
    });

    await t.test('limit_conn closes the session over the limit', async () => {
      const first = converse(srv.port(8083), [{ send: 'a' }], 10_000);
      await new Promise<void>((r) => { onHeld = r; if (held.length) r(); });
      const second = await converse(srv.port(8083), [{ send: 'b' }]);
      assert.equal(second.data, '');
      assert.notEqual(second.end, 'open');
      held.shift()!();
      assert.equal((await first).end, 'fin');
    });

    const lines = await waitForLines(srv, 'm.log', 1 + 2 * KEYS.length + 1 + 2 * KEYS.length + 2);
    out.log = lines.map((l) => l.replace(/^\d+/, (p) => Object.entries(names).find(([, v]) => String(v) === p)?.[0] ?? p)
      .replace(/127\.0\.0\.1:(\d+)/g, (m, port: string) => {
        const i = peers.findIndex((b) => String(b.port) === port);
        return i >= 0 ? `B${i}` : port === String(hold.port) ? 'HOLD' : m;
      })).sort();
    assert.ok((out.log as string[]).includes('P3 503 "loopback" "out" "" "REJECTED" 127.0.0.1 127.0.0.1 "-"'), String(out.log));
    out.limited = logLines(srv, /limiting/, names);
    assert.deepEqual(out.limited, ['[error] limiting connections by zone "conns" while initializing session, client: 127.0.0.1, server: 127.0.0.1:P3']);
  });
}

test('Gatehouse saw what nginx saw', { skip: flavors[1].skip }, () => {
  const g = observed.get('gatehouse');
  const n = observed.get('nginx');
  assert.ok(g && n, 'both runs completed');
  assert.deepEqual(g, n);
});
