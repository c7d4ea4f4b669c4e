// stream {} proxying as a client and a backend see it: relaying, the end of
// a session with and without proxy_half_close, proxy_next_upstream, and
// proxy_timeout, with the access and error log lines nginx writes.
// Reference: every scenario also runs on Debian's nginx 1.22 (with its
// dynamic stream module) and what the client, the backend and the logs
// see must be the same.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type net from 'node:net';
import { freePort } from '../kit/server.ts';
import { converse, flavors, logLines, startBackend, upperEcho, waitForLines } from './stream-kit.ts';
import type { Backend } from './stream-kit.ts';

interface Ports {
  echo: number;
  lateReply: number;
  byeFirst: number;
  silent: number;
  refused: number;
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
  const refused = await freePort();
  const all = [echo, lateReply, byeFirst, silent];
  return { ports: { echo: echo.port, lateReply: lateReply.port, byeFirst: byeFirst.port, silent: silent.port, refused }, received, all };
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
      L6: srv.port(8086), L7: srv.port(8087), L8: srv.port(8088),
      ECHO: b.ports.echo, LATE: b.ports.lateReply, BYE: b.ports.byeFirst, SILENT: b.ports.silent, REFUSED: b.ports.refused,
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

    const lines = await waitForLines(srv, 's.log', 8);
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
    ].sort());

    out.errors = logLines(srv, / \[(error|warn)\] /, names);
    assert.deepEqual(out.errors, [
      '[error] connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: 127.0.0.1:L6, upstream: "127.0.0.1:REFUSED", bytes from/to client:0/0, bytes from/to upstream:0/0',
      '[warn] upstream server temporarily disabled while connecting to upstream, client: 127.0.0.1, server: 127.0.0.1:L6, upstream: "127.0.0.1:REFUSED", bytes from/to client:0/0, bytes from/to upstream:0/0',
      '[error] connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: 127.0.0.1:L7, upstream: "127.0.0.1:REFUSED", bytes from/to client:0/0, bytes from/to upstream:0/0',
      '[warn] upstream server temporarily disabled while connecting to upstream, client: 127.0.0.1, server: 127.0.0.1:L7, upstream: "127.0.0.1:REFUSED", bytes from/to client:0/0, bytes from/to upstream:0/0',
    ]);
    out.timeout = logLines(srv, /timed out/, names);
    assert.deepEqual(out.timeout, [
      '[info] connection timed out (110: Connection timed out) while proxying connection, client: 127.0.0.1, server: 127.0.0.1:L8, upstream: "127.0.0.1:SILENT", bytes from/to client:0/0, bytes from/to upstream:0/0',
    ]);
    out.disconnects = logLines(srv, /disconnected/, names).sort();
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
