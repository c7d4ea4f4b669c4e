/**
 * Session resumption: `ssl_session_cache shared:` (one cache for every
 * worker), `builtin`, `off`/`none`, session tickets with
 * `ssl_session_ticket_key` files (tickets outlive a restart), TLS 1.2
 * session ids and TLS 1.3 stateful tickets.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startGatehouse } from '../kit/server.ts';
import { CertFactory } from './certs.ts';
import { bodyOf, tlsExchange } from './client.ts';
import type { TlsClientOptions } from './client.ts';

let certs: CertFactory;
let files: Record<string, Buffer>;

before(() => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-sess-')));
  certs.selfSigned('localhost');
  files = {
    'localhost.crt': certs.read('localhost.crt'), 'localhost.key': certs.read('localhost.key'),
    'ticket.key': crypto.randomBytes(80), 'other.key': crypto.randomBytes(48),
  };
});
after(() => fs.rmSync(certs.dir, { recursive: true, force: true }));

function conf(servers: string, workers = 1): string {
  return `
worker_processes ${workers};
events {}
http {
    ssl_certificate localhost.crt;
    ssl_certificate_key localhost.key;
    root %%PREFIX%%;
${servers}
}
`;
}

/** Connects once for a session, then `n` more times resuming it; returns the resumed bodies. */
async function resume(port: number, n: number, opts: TlsClientOptions = {}): Promise<string[]> {
  const first = await tlsExchange(port, opts);
  assert.equal(bodyOf(first.data).split(':')[0], '.', 'a new session first');
  assert.ok(first.session, 'the server gave a session');
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(bodyOf((await tlsExchange(port, { ...opts, session: first.session })).data));
  return out;
}

test('a shared cache resumes sessions in every worker (TLS 1.3 and 1.2, tickets off)', async (t) => {
  const srv = await startGatehouse({
    conf: conf(`
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        ssl_session_cache shared:SSL:1m;
        ssl_session_tickets off;
        location / { return 200 "$ssl_session_reused:$ssl_session_id"; }
        location /missing { }
    }`, 2),
    files,
  });
  t.after(() => srv.stop());
  const port = srv.port(8443);
  for (const maxVersion of ['TLSv1.3', 'TLSv1.2'] as const) {
    const bodies = await resume(port, 12, { maxVersion });
    for (const b of bodies) assert.match(b, /^r:[0-9a-f]{64}$/, `${maxVersion} resumed`);
  }
  // which workers served: each logs its thread id with a 404 (nginx's `PID#TID` prefix)
  const first = await tlsExchange(port, { request: 'GET /missing/x HTTP/1.0\r\n\r\n' });
  for (let i = 0; i < 12; i++) await tlsExchange(port, { session: first.session, request: 'GET /missing/x HTTP/1.0\r\n\r\n' });
  const tids = new Set([...srv.readFile('error.log').toString().matchAll(/\d+#(\d+): \*\d+ open\(\)/g)].map((m) => m[1]));
  assert.ok(tids.size >= 2, `connections reached both workers (${[...tids]})`);
});

test('a full shared cache drops its oldest sessions and keeps serving the newest', async (t) => {
  const srv = await startGatehouse({
    conf: conf(`
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        ssl_session_cache shared:SMALL:32k;
        ssl_session_tickets off;
        location / { return 200 "$ssl_session_reused"; }
    }`),
    files,
  });
  t.after(() => srv.stop());
  const port = srv.port(8443);
  const oldest = await tlsExchange(port);
  let latest = oldest;
  for (let i = 0; i < 150; i++) latest = await tlsExchange(port);
  assert.equal(bodyOf((await tlsExchange(port, { session: latest.session })).data), 'r', 'the newest session resumes');
  assert.equal(bodyOf((await tlsExchange(port, { session: oldest.session })).data), '.', 'the oldest was evicted');
});

test('sessions survive a reload (shared cache, and tickets with the generated keys)', async (t) => {
  const srv = await startGatehouse({
    conf: conf(`
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        ssl_session_cache shared:SSL:1m;
        ssl_session_tickets off;
        location / { return 200 "$ssl_session_reused"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8444%% ssl;
        location / { return 200 "$ssl_session_reused"; }
    }`, 2),
    files,
  });
  t.after(() => srv.stop());
  const cached = await tlsExchange(srv.port(8443));
  const ticket = await tlsExchange(srv.port(8444));
  await srv.reload();
  assert.equal(bodyOf((await tlsExchange(srv.port(8443), { session: cached.session })).data), 'r', 'cache');
  assert.equal(bodyOf((await tlsExchange(srv.port(8444), { session: ticket.session })).data), 'r', 'ticket');
});

test('builtin caches resume; off and none do not', async (t) => {
  const srv = await startGatehouse({
    conf: conf(`
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        ssl_session_cache builtin:1000;
        ssl_session_tickets off;
        location / { return 200 "$ssl_session_reused"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8444%% ssl;
        ssl_session_cache off;
        ssl_session_tickets off;
        location / { return 200 "$ssl_session_reused"; }
    }
    server {
        listen 127.0.0.1:%%PORT_8445%% ssl;
        ssl_session_cache none;
        ssl_session_tickets off;
        location / { return 200 "$ssl_session_reused"; }
    }`),
    files,
  });
  t.after(() => srv.stop());
  assert.deepEqual(await resume(srv.port(8443), 2), ['r', 'r']);
  assert.deepEqual(await resume(srv.port(8444), 1), ['.']);
  assert.deepEqual(await resume(srv.port(8445), 1), ['.']);
});

test('tickets encrypted with ssl_session_ticket_key outlive a restart; another key refuses them', async (t) => {
  const servers = (key: string) => conf(`
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        ssl_session_ticket_key ${key};
        location / { return 200 "$ssl_session_reused"; }
    }`);
  const a = await startGatehouse({ conf: servers('ticket.key'), files });
  const first = await tlsExchange(a.port(8443));
  assert.equal(bodyOf(first.data), '.');
  assert.equal(bodyOf((await tlsExchange(a.port(8443), { session: first.session })).data), 'r');
  await a.stop();

  const b = await startGatehouse({ conf: servers('ticket.key'), files });
  t.after(() => b.stop());
  assert.equal(bodyOf((await tlsExchange(b.port(8443), { session: first.session })).data), 'r', 'same key file, new process');

  const c = await startGatehouse({ conf: servers('other.key'), files });
  t.after(() => c.stop());
  assert.equal(bodyOf((await tlsExchange(c.port(8443), { session: first.session })).data), '.', 'another key');
});

test('a ticket key file of the wrong size is refused as nginx does', async () => {
  await assert.rejects(
    startGatehouse({ conf: conf('    server { listen 127.0.0.1:%%PORT_8443%% ssl; ssl_session_ticket_key bad.key; }'), files: { ...files, 'bad.key': Buffer.alloc(40) } }),
    /\[emerg\] ".*bad\.key" must be 48 or 80 bytes/,
  );
});
