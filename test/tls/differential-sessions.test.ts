/**
 * Session resumption against nginx: Gatehouse and Debian's nginx run the
 * same configuration (two workers) and resume — or refuse to resume — the
 * same sessions: `ssl_session_cache shared:` with tickets off (TLS 1.2
 * session ids, TLS 1.3 stateful tickets), `ssl_session_cache off` with
 * tickets off, `ssl_session_ticket_key` files of 48 and 80 bytes across a
 * reload, a restart and a change of the keys' order, and
 * `ssl_session_timeout`.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startPair } from '../kit/pair.ts';
import { nginxSkip } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { CertFactory } from './certs.ts';
import { bodyOf, tlsExchange } from './client.ts';
import { both, same } from './differential-kit.ts';

let certs: CertFactory;
let files: Record<string, Buffer>;

before(() => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-dsess-')));
  certs.selfSigned('localhost');
  files = {
    'localhost.crt': certs.read('localhost.crt'), 'localhost.key': certs.read('localhost.key'),
    'a48.key': crypto.randomBytes(48), 'b48.key': crypto.randomBytes(48), 'a80.key': crypto.randomBytes(80),
  };
});
after(() => fs.rmSync(certs.dir, { recursive: true, force: true }));

function conf(keys48: string[]): string {
  const server = (port: string, extra: string) => `
    server {
        listen 127.0.0.1:%%PORT_${port}%% ssl;
        ${extra}
        location / { return 200 "$ssl_session_reused"; }
    }`;
  return `
worker_processes 2;
events {}
http {
    access_log off;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate localhost.crt;
    ssl_certificate_key localhost.key;
    ${server('8443', 'ssl_session_cache shared:SSL:1m; ssl_session_tickets off;')}
    ${server('8444', 'ssl_session_cache off; ssl_session_tickets off;')}
    ${server('8445', keys48.map((k) => `ssl_session_ticket_key ${k};`).join(' '))}
    ${server('8446', 'ssl_session_ticket_key a80.key;')}
    ${server('8447', 'ssl_session_cache shared:SHORT:1m; ssl_session_tickets off; ssl_session_timeout 2s;')}
    ${server('8448', 'ssl_session_cache shared:T:1m; ssl_session_timeout 2s;')}
}
`;
}

type Version = 'TLSv1.2' | 'TLSv1.3';

/** A new session from `srv`'s `port` (undefined when the server gave none to keep). */
async function maybeSession(srv: RunningServer, port: number, maxVersion: Version): Promise<Buffer | undefined> {
  const x = await tlsExchange(srv.port(port), { maxVersion });
  assert.equal(bodyOf(x.data), '.', `${srv.flavor}: a new session first`);
  return x.session;
}

async function newSession(srv: RunningServer, port: number, maxVersion: Version): Promise<Buffer> {
  const s = await maybeSession(srv, port, maxVersion);
  assert.ok(s, `${srv.flavor}: the client got a session`);
  return s;
}

/** `$ssl_session_reused` of `n` connections offering `session` (several, so both workers answer). */
async function offer(srv: RunningServer, port: number, session: Buffer, maxVersion: Version, n = 6): Promise<string> {
  let out = '';
  for (let i = 0; i < n; i++) out += bodyOf((await tlsExchange(srv.port(port), { session, maxVersion })).data);
  return out;
}

test('session cache and tickets: what resumes, as in nginx', async (t) => {
  const pair = await startPair(t, { conf: conf(['a48.key', 'b48.key']), files });
  for (const v of ['TLSv1.2', 'TLSv1.3'] as const) {
    const cached = await same(pair, `shared cache, ${v}`, async (srv) => offer(srv, 8443, await newSession(srv, 8443, v), v));
    assert.equal(cached, 'rrrrrr', `shared cache resumes in both workers (${v})`);
    // (nginx's `off` makes OpenSSL send an empty TLS 1.2 session id; Gatehouse sends one that never resumes: docs/tls.md)
    const off = await same(pair, `cache off, tickets off, ${v}`, async (srv) => {
      const session = await maybeSession(srv, 8444, v);
      return session ? (await offer(srv, 8444, session, v, 2)).includes('r') : false;
    });
    assert.equal(off, false, `cache off, tickets off: nothing resumes (${v})`);
    assert.equal(await same(pair, `48-byte ticket keys, ${v}`, async (srv) => offer(srv, 8445, await newSession(srv, 8445, v), v)), 'rrrrrr');
    assert.equal(await same(pair, `80-byte ticket key, ${v}`, async (srv) => offer(srv, 8446, await newSession(srv, 8446, v), v)), 'rrrrrr');
  }
});

// nginx's session id context is a SHA-1 digest set as raw bytes; Node's API takes a UTF-8 string, so
// the contexts differ and OpenSSL will not resume the other server's sessions (docs/tls.md)
test('the same 48-byte key file: tickets are interchangeable between nginx and Gatehouse', { skip: !!nginxSkip && nginxSkip, todo: 'session id contexts differ' }, async (t) => {
  const pair = await startPair(t, { conf: conf(['a48.key']), files });
  for (const v of ['TLSv1.2', 'TLSv1.3'] as const) {
    assert.equal(await offer(pair.gh, 8445, await newSession(pair.ng!, 8445, v), v, 2), 'rr', `nginx's ticket resumes in Gatehouse (${v})`);
    assert.equal(await offer(pair.ng!, 8445, await newSession(pair.gh, 8445, v), v, 2), 'rr', `Gatehouse's ticket resumes in nginx (${v})`);
  }
});

test('ssl_session_timeout: sessions and tickets expire, as in nginx', async (t) => {
  const pair = await startPair(t, { conf: conf(['a48.key']), files });
  const sessions = await both(pair, async (srv) => ({
    cache12: await newSession(srv, 8447, 'TLSv1.2'), cache13: await newSession(srv, 8447, 'TLSv1.3'),
    ticket12: await newSession(srv, 8448, 'TLSv1.2'), ticket13: await newSession(srv, 8448, 'TLSv1.3'),
  }));
  const pick = (srv: RunningServer) => (srv === pair.gh ? sessions.gh : sessions.ng!);
  const offerAll = (srv: RunningServer) => Promise.all([
    offer(srv, 8447, pick(srv).cache12, 'TLSv1.2', 1), offer(srv, 8447, pick(srv).cache13, 'TLSv1.3', 1),
    offer(srv, 8448, pick(srv).ticket12, 'TLSv1.2', 1), offer(srv, 8448, pick(srv).ticket13, 'TLSv1.3', 1),
  ]);
  assert.deepEqual(await same(pair, 'before the timeout', offerAll), ['r', 'r', 'r', 'r']);
  await new Promise((r) => setTimeout(r, 3100));
  assert.deepEqual(await same(pair, 'after the timeout', offerAll), ['.', '.', '.', '.']);
});

test('ticket keys: tickets resume after a reload with the keys reordered and after a restart', async (t) => {
  const first = await startPair(t, { conf: conf(['a48.key']), files });
  const issued = await both(first, async (srv) => ({ v12: await newSession(srv, 8445, 'TLSv1.2'), v13: await newSession(srv, 8445, 'TLSv1.3') }));
  const pick = (srv: RunningServer, pair: typeof first) => (srv === pair.gh ? issued.gh : issued.ng!);

  // reload: a new key first, the old one second — the old tickets still resume (and are renewed)
  await both(first, async (srv) => {
    srv.writeConf(conf(['b48.key', 'a48.key']));
    await srv.reload();
  });
  const reordered = (srv: RunningServer) => Promise.all([
    offer(srv, 8445, pick(srv, first).v12, 'TLSv1.2', 2), offer(srv, 8445, pick(srv, first).v13, 'TLSv1.3', 2),
  ]);
  assert.deepEqual(await same(first, 'after a reload with the old key second', reordered), ['rr', 'rr']);

  // restart: a new server with the same key file resumes tickets of the old one
  const second = await startPair(t, { conf: conf(['a48.key']), files });
  const restarted = (srv: RunningServer) => {
    const old = srv === second.gh ? issued.gh : issued.ng!;
    return Promise.all([offer(srv, 8445, old.v12, 'TLSv1.2', 2), offer(srv, 8445, old.v13, 'TLSv1.3', 2)]);
  };
  assert.deepEqual(await same(second, 'after a restart', restarted), ['rr', 'rr']);
});
