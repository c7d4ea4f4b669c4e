// stream {} proxying as a client and a backend see it: relaying, the end of
// a session with and without proxy_half_close, proxy_next_upstream, and
// proxy_timeout, with the access and error log lines nginx writes.
// Reference: every scenario also runs on Debian's nginx 1.22 (with its
// dynamic stream module) and what the client, the backend and the logs
// see must be the same.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { freePort } from '../kit/server.ts';
import { converse, flavors, logLines, startBackend, upperEcho, waitForLines } from './stream-kit.ts';
import type { Backend } from './stream-kit.ts';

interface Ports {
  echo: number;
  lateReply: number;
  byeFirst: number;
  silent: number;
  refused: number;
  resetting: number;
}

const conf = (p: Ports) => `
events {}
stream {
    log_format s '$server_port $status $bytes_received $bytes_sent "$upstream_addr" "$upstream_bytes_sent" "$upstream_bytes_received" $protocol $connection';
    access_log %%PREFIX%%/s.log s;

    upstream retry { server 127.0.0.1:${p.refused}; server 127.0.0.1:${p.echo}; }
    upstream noretry { server 127.0.0.1:${p.refused}; server 127.0.0.1:${p.echo}; }

    server { listen 127.0.0.1:%%PORT_8081%%; proxy_pass 127.0.0.1:${p.echo}; }
    server { listen 127.0.0.1:%%PORT_8082%%; proxy_pass 127.0.0.1:${p.lateReply}; }
    server { listen 127.0.0.1:%%PORT_8083%%; proxy_pass 127.0.0.1:${p.lateReply}; proxy_half_close on; }
    server { listen 127.0.0.1:%%PORT_8084%%; proxy_pass 127.0.0.1:${p.byeFirst}; }
    server { listen 127.0.0.1:%%PORT_8085%%; proxy_pass 127.0.0.1:${p.byeFirst}; proxy_half_close on; }
    server { listen 127.0.0.1:%%PORT_8086%%; proxy_pass retry; }
    server { listen 127.0.0.1:%%PORT_8087%%; proxy_pass noretry; proxy_next_upstream off; }
    server { listen 127.0.0.1:%%PORT_8088%%; proxy_pass 127.0.0.1:${p.silent}; proxy_timeout 1s; }

    upstream dead { server 127.0.0.1:${p.refused} down; server 127.0.0.1:${p.echo} down; }
    map $server_port $target { default localhost:${p.echo}; }
    server { listen 127.0.0.1:%%PORT_8089%%; proxy_pass dead; }
    server { listen 127.0.0.1:%%PORT_8090%%; proxy_pass $target; }
    server { listen 127.0.0.1:%%PORT_8091%%; proxy_pass 127.0.0.1:${p.silent}; }
    server { listen 127.0.0.1:%%PORT_8092%%; proxy_pass 127.0.0.1:${p.resetting}; }
}
`;

/** What one run observed, compared between Gatehouse and nginx. */
type Observed = Record<string, unknown>;
const observed = new Map<string, Observed>();

async function backends(): Promise<{ ports: Ports; received: Record<string, string>; all: Backend[] }> {
  const received: Record<string, string> = { lateReply: '', byeFirst: '' };
  const record = (key: string) => (s: net.Socket) => s.on('data', (d) => { received[key] += d.toString('latin1'); });
  const echo = await startBackend(upperEcho);
  // answers only after the client's FIN reached it: lost unless proxy_half_close passes the FIN on
  const lateReply = await startBackend((s) => {
    record('lateReply')(s);
    s.on('end', () => setTimeout(() => s.end('late'), 100));
  });
  // says goodbye and closes its side at once, then keeps reading
  const byeFirst = await startBackend((s) => {
    record('byeFirst')(s);
    s.end('bye');
  });
  const silent = await startBackend(() => { /* never answers */ });
  // answers, then resets the connection at the next data
  const resetting = await startBackend((s) => {
    s.write('first');
    s.on('data', () => s.resetAndDestroy());
  });
  const refused = await freePort();
  const all = [echo, lateReply, byeFirst, silent, resetting];
  return {
    ports: { echo: echo.port, lateReply: lateReply.port, byeFirst: byeFirst.port, silent: silent.port, refused, resetting: resetting.port },
    received,
    all,
  };
}

for (const flavor of flavors) {
  test(`stream proxy (${flavor.name})`, { skip: flavor.skip }, async (t) => {
    const b = await backends();
    t.after(() => Promise.all(b.all.map((x) => x.close())));
    const srv = await flavor.start({ conf: conf(b.ports) });
    t.after(() => srv.stop());
    const out: Observed = {};
    observed.set(flavor.name, out);
    const names = {
      L1: srv.port(8081), L2: srv.port(8082), L3: srv.port(8083), L4: srv.port(8084), L5: srv.port(8085),
      L6: srv.port(8086), L7: srv.port(8087), L8: srv.port(8088), L9: srv.port(8089), L10: srv.port(8090), L11: srv.port(8091), L12: srv.port(8092),
      ECHO: b.ports.echo, RESET: b.ports.resetting, LATE: b.ports.lateReply, BYE: b.ports.byeFirst, SILENT: b.ports.silent, REFUSED: b.ports.refused,
    };

    await t.test('relays both ways in turns, then ends on the client FIN', async () => {
      const r = await converse(srv.port(8081), [{ send: 'hello', until: 5 }, { send: ' world', until: 11 }, { fin: true }]);
      assert.deepEqual(r, { data: 'HELLO WORLD', end: 'fin' });
    });

    await t.test('without proxy_half_close a client FIN ends the session: the late reply is lost', async () => {
      const r = await converse(srv.port(8082), [{ send: 'abc', fin: true }]);
      assert.deepEqual(r, { data: '', end: 'fin' });
      // what the client sent before its FIN still reached the backend
      await waitFor(() => b.received.lateReply === 'abc');
      assert.equal(b.received.lateReply, 'abc');
    });

    await t.test('with proxy_half_close the FIN is passed on and the reply still arrives', async () => {
      b.received.lateReply = '';
      const r = await converse(srv.port(8083), [{ send: 'abc', fin: true }]);
      assert.deepEqual(r, { data: 'late', end: 'fin' });
      assert.equal(b.received.lateReply, 'abc');
    });

    await t.test('without proxy_half_close an upstream FIN ends the session after its data', async () => {
      const r = await converse(srv.port(8084), [{ until: 3 }, { delayMs: 200 }, { send: 'more' }]);
      assert.deepEqual(r, { data: 'bye', end: 'fin' });
    });

    await t.test('with proxy_half_close the client may still send after the upstream FIN', async () => {
      b.received.byeFirst = '';
      const r = await converse(srv.port(8085), [{ until: 3 }, { delayMs: 100 }, { send: 'more', fin: true }]);
      assert.deepEqual(r, { data: 'bye', end: 'fin' });
      // the backend got what was sent after its own FIN
      await waitFor(() => b.received.byeFirst === 'more');
      assert.equal(b.received.byeFirst, 'more');
    });

    await t.test('a refused peer is skipped for the next one (proxy_next_upstream on)', async () => {
      const r = await converse(srv.port(8086), [{ send: 'x', until: 1 }, { fin: true }]);
      assert.deepEqual(r, { data: 'X', end: 'fin' });
    });

    await t.test('proxy_next_upstream off: the session ends with 502', async () => {
      const r = await converse(srv.port(8087), [{ send: 'x', fin: true }]);
      assert.equal(r.data, '');
    });

    await t.test('proxy_timeout ends an idle session', async () => {
      const r = await converse(srv.port(8088), [], 5000);
      assert.deepEqual(r, { data: '', end: 'fin' });
    });

    await t.test('no live upstreams: every peer is down', async () => {
      const r = await converse(srv.port(8089), [{ send: 'x', fin: true }]);
      assert.equal(r.data, '');
    });

    await t.test('a host name from variables needs a resolver', async () => {
      const r = await converse(srv.port(8090), [{ send: 'x', fin: true }]);
      assert.equal(r.data, '');
    });

    await t.test('a client reset ends the session', async () => {
      await new Promise<void>((resolve) => {
        const c = net.connect({ port: srv.port(8091), host: '127.0.0.1' }, () => {
          c.write('x');
          setTimeout(() => { c.resetAndDestroy(); resolve(); }, 100);
        });
      });
    });

    await t.test('an upstream reset ends the session after what it sent', async () => {
      const r = await converse(srv.port(8092), [{ until: 5 }, { send: 'x' }]);
      assert.deepEqual(r, { data: 'first', end: 'fin' });
    });

    const lines = await waitForLines(srv, 's.log', 12);
    out.accessLog = lines.map((l) => normaliseLine(l, names)).sort();
    assert.deepEqual(out.accessLog, [
      // client connections and upstream connections (refused ones too) share the numbering
      'L1 200 11 11 "127.0.0.1:ECHO" "11" "11" TCP 1',
      'L2 200 3 0 "127.0.0.1:LATE" "3" "0" TCP 3',
      'L3 200 3 4 "127.0.0.1:LATE" "3" "4" TCP 5',
      'L4 200 0 3 "127.0.0.1:BYE" "0" "3" TCP 7',
      'L5 200 4 3 "127.0.0.1:BYE" "4" "3" TCP 9',
      'L6 200 1 1 "127.0.0.1:REFUSED, 127.0.0.1:ECHO" "0, 1" "0, 1" TCP 11',
      'L7 502 0 0 "127.0.0.1:REFUSED" "0" "0" TCP 14',
      'L8 200 0 0 "127.0.0.1:SILENT" "0" "0" TCP 16',
      'L9 502 0 0 "dead" "0" "0" TCP 18',
      'L10 500 0 0 "-" "-" "-" TCP 19',
      'L11 200 1 0 "127.0.0.1:SILENT" "1" "0" TCP 20',
      'L12 200 1 5 "127.0.0.1:RESET" "1" "5" TCP 22',
    ].sort());

    out.errors = logLines(srv, / \[(error|warn)\] /, names);
    assert.deepEqual(out.errors, [
      '[error] connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: 127.0.0.1:L6, upstream: "127.0.0.1:REFUSED", bytes from/to client:0/0, bytes from/to upstream:0/0',
      '[warn] upstream server temporarily disabled while connecting to upstream, client: 127.0.0.1, server: 127.0.0.1:L6, upstream: "127.0.0.1:REFUSED", bytes from/to client:0/0, bytes from/to upstream:0/0',
      '[error] connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: 127.0.0.1:L7, upstream: "127.0.0.1:REFUSED", bytes from/to client:0/0, bytes from/to upstream:0/0',
      '[warn] upstream server temporarily disabled while connecting to upstream, client: 127.0.0.1, server: 127.0.0.1:L7, upstream: "127.0.0.1:REFUSED", bytes from/to client:0/0, bytes from/to upstream:0/0',
      '[error] no live upstreams while connecting to upstream, client: 127.0.0.1, server: 127.0.0.1:L9, upstream: "dead", bytes from/to client:0/0, bytes from/to upstream:0/0',
      '[error] no resolver defined to resolve localhost, client: 127.0.0.1, server: 127.0.0.1:L10, bytes from/to client:0/0, bytes from/to upstream:0/0',
      '[error] recv() failed (104: Connection reset by peer) while proxying and reading from upstream, client: 127.0.0.1, server: 127.0.0.1:L12, upstream: "127.0.0.1:RESET", bytes from/to client:1/5, bytes from/to upstream:5/1',
    ]);
    out.timeout = logLines(srv, /timed out/, names);
    assert.deepEqual(out.timeout, [
      '[info] connection timed out (110: Connection timed out) while proxying connection, client: 127.0.0.1, server: 127.0.0.1:L8, upstream: "127.0.0.1:SILENT", bytes from/to client:0/0, bytes from/to upstream:0/0',
    ]);
    out.disconnects = logLines(srv, /disconnected/, names).sort();
    out.reset = logLines(srv, /reading from client/, names);
    assert.deepEqual(out.reset, [
      '[info] recv() failed (104: Connection reset by peer) while proxying and reading from client, client: 127.0.0.1, server: 127.0.0.1:L11, upstream: "127.0.0.1:SILENT", bytes from/to client:1/0, bytes from/to upstream:0/1',
    ]);
  });
}

test('Gatehouse saw what nginx saw', { skip: flavors[1].skip }, () => {
  const g = observed.get('gatehouse');
  const n = observed.get('nginx');
  assert.ok(g && n, 'both runs completed');
  assert.deepEqual(g, n);
});

function normaliseLine(line: string, names: Record<string, number>): string {
  let t = line;
  for (const [name, port] of Object.entries(names)) t = t.replaceAll(`:${port}`, `:${name}`).replace(new RegExp(`^${port} `), `${name} `);
  return t;
}

async function waitFor(cond: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}
