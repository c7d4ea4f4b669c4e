// ssl_preread: the ClientHello is read without terminating TLS, its SNI,
// ALPN and version become variables, and the handshake is passed on whole
// to the peer a map chose by the SNI. Reference: the same configuration
// on Debian's nginx 1.22; the client must see the same bytes and the
// access log the same lines.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { converse, flavors, waitForLines } from './stream-kit.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-preread-'));
test.after(() => fs.rmSync(dir, { recursive: true, force: true }));
execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', 'k.pem', '-out', 'c.pem', '-days', '2', '-subj', '/CN=preread'], { cwd: dir, stdio: 'ignore' });
const creds = { key: fs.readFileSync(path.join(dir, 'k.pem')), cert: fs.readFileSync(path.join(dir, 'c.pem')) };

/** A TLS peer that says its name and the ALPN protocol it agreed on, then closes. */
async function tlsPeer(name: string): Promise<tls.Server> {
  const server = tls.createServer({ ...creds, ALPNProtocols: ['h2', 'http/1.1'] }, (s) => s.end(`${name} ${s.alpnProtocol || '-'}`));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return server;
}

/** The first bytes a TLS client sends (its ClientHello) with these options. */
async function clientHello(options: tls.ConnectionOptions): Promise<string> {
  const catcher = net.createServer();
  await new Promise<void>((r) => catcher.listen(0, '127.0.0.1', () => r()));
  const port = (catcher.address() as net.AddressInfo).port;
  const hello = new Promise<string>((resolve) => catcher.once('connection', (s) => s.once('data', (d) => { resolve(d.toString('latin1')); s.destroy(); })));
  const c = tls.connect({ port, host: '127.0.0.1', rejectUnauthorized: false, ...options });
  c.on('error', () => { /* the catcher hangs up */ });
  const bytes = await hello;
  c.destroy();
  catcher.close();
  return bytes;
}

const peers = await Promise.all([tlsPeer('A'), tlsPeer('B')]);
test.after(() => { for (const p of peers) p.close(); });
const peerPort = (i: number) => (peers[i].address() as net.AddressInfo).port;

const conf = `
events {}
stream {
    log_format p '$ssl_preread_protocol "$ssl_preread_server_name" "$ssl_preread_alpn_protocols" $status';
    access_log %%PREFIX%%/p.log p;

    map $ssl_preread_server_name $peer {
        a.example    127.0.0.1:${peerPort(0)};
        default      127.0.0.1:${peerPort(1)};
    }

    server {
        listen 127.0.0.1:%%PORT_8081%%;
        ssl_preread on;
        proxy_pass $peer;
    }
    server {
        listen 127.0.0.1:%%PORT_8082%%;
        ssl_preread on;
        return "[$ssl_preread_protocol|$ssl_preread_server_name|$ssl_preread_alpn_protocols]";
    }
}
`;

const hellos = {
  tls13: await clientHello({ servername: 'a.example', ALPNProtocols: ['h2', 'http/1.1'] }),
  tls12: await clientHello({ servername: 'b.example', maxVersion: 'TLSv1.2' }),
};

const observed = new Map<string, Record<string, unknown>>();

for (const flavor of flavors) {
  test(`stream ssl_preread (${flavor.name})`, { skip: flavor.skip }, async (t) => {
    const srv = await flavor.start({ conf });
    t.after(() => srv.stop());
    const out: Record<string, unknown> = {};
    observed.set(flavor.name, out);

    await t.test('the SNI picks the peer and the whole handshake reaches it', async () => {
      const talk = (servername: string, alpn?: string[]) => new Promise<string>((resolve, reject) => {
        const c = tls.connect({ port: srv.port(8081), host: '127.0.0.1', servername, ALPNProtocols: alpn, rejectUnauthorized: false });
        let data = '';
        c.on('data', (d) => { data += d.toString('latin1'); });
        c.on('end', () => { c.end(); resolve(data); });
        c.on('error', reject);
      });
      out.proxied = [await talk('a.example', ['h2']), await talk('b.example'), await talk('a.example', ['http/1.1'])];
      assert.deepEqual(out.proxied, ['A h2', 'B -', 'A http/1.1']);
    });

    await t.test('the variables of a TLS 1.3 and a TLS 1.2 hello', async () => {
      out.tls13 = (await converse(srv.port(8082), [{ send: hellos.tls13 }])).data;
      out.tls12 = (await converse(srv.port(8082), [{ send: hellos.tls12 }])).data;
      assert.equal(out.tls13, '[TLSv1.3|a.example|h2,http/1.1]');
      assert.equal(out.tls12, '[TLSv1.2|b.example|]');
    });

    await t.test('what is not a handshake leaves the variables unset', async () => {
      out.plain = (await converse(srv.port(8082), [{ send: 'hello there\r\n' }])).data;
      assert.equal(out.plain, '[||]');
    });

    await t.test('a hello cut short ends with the client', async () => {
      out.cut = await converse(srv.port(8082), [{ send: hellos.tls13.slice(0, 20), fin: true }]);
      assert.deepEqual(out.cut, { data: '', end: 'fin' });
    });

    out.log = (await waitForLines(srv, 'p.log', 7)).sort();
    assert.equal((out.log as string[]).length, 7);
  });
}

test('Gatehouse saw what nginx saw', { skip: flavors[1].skip }, () => {
  const g = observed.get('gatehouse');
  const n = observed.get('nginx');
  assert.ok(g && n, 'both runs completed');
  assert.deepEqual(g, n);
});
