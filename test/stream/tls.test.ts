/**
 * TLS in stream {} against nginx: Gatehouse and Debian's nginx (its
 * dynamic stream module) run one configuration, and a node:tls client sees
 * the same from both — `listen … ssl` with `return` of the $ssl_*
 * variables, SNI, session reuse through the session cache, client
 * certificates required and checked, and `proxy_ssl` to a TLS upstream
 * with verification and SNI (a name that does not match fails over to
 * nothing: the client gets no data, the error log says why). Virtual
 * servers chosen by SNI (`server_name`, nginx ≥ 1.25.5) are checked on
 * Gatehouse alone: nginx 1.22 refuses two servers on one address.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startPair } from '../kit/pair.ts';
import type { Pair } from '../kit/pair.ts';
import { startGatehouse } from '../kit/server.ts';
import { CertFactory } from '../tls/certs.ts';
import { tlsExchange } from '../tls/client.ts';
import type { TlsClientOptions } from '../tls/client.ts';
import { same, waitLog } from '../tls/differential-kit.ts';
import type { RunningServer } from '../kit/server.ts';

let certs: CertFactory;
let files: Record<string, Buffer>;

before(() => {
  certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-stream-tls-')));
  certs.selfSigned('ca');
  certs.signed('server.test', 'ca', { leaf: true });
  certs.signed('up.test', 'ca', { leaf: true });
  certs.signed('client', 'ca', { leaf: true });
  certs.selfSigned('stranger');
  certs.selfSigned('other.test');
  files = {};
  for (const f of fs.readdirSync(certs.dir)) if (/\.(crt|key)$/.test(f)) files[f] = certs.read(f);
});
after(() => fs.rmSync(certs.dir, { recursive: true, force: true }));

const VARS = '"$ssl_protocol|$ssl_server_name|$ssl_session_reused|$ssl_client_verify|$ssl_client_s_dn|$ssl_alpn_protocol\\n"';

const conf = `
events {}
stream {
    ssl_certificate server.test.crt;
    ssl_certificate_key server.test.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:STREAM:1m;

    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        return ${VARS};
    }
    server {
        listen 127.0.0.1:%%PORT_8444%% ssl;
        ssl_verify_client on;
        ssl_client_certificate ca.crt;
        return ${VARS};
    }
    server {
        listen 127.0.0.1:%%PORT_8445%% ssl;
        ssl_alpn x-one x-two;
        return ${VARS};
    }
    server {
        listen 127.0.0.1:%%PORT_8446%% ssl;
        ssl_certificate up.test.crt;
        ssl_certificate_key up.test.key;
        return "upstream $ssl_server_name $ssl_protocol\\n";
    }
    server {
        listen 127.0.0.1:%%PORT_8447%%;
        proxy_pass 127.0.0.1:%%PORT_8446%%;
        proxy_ssl on;
        proxy_ssl_verify on;
        proxy_ssl_trusted_certificate ca.crt;
        proxy_ssl_name up.test;
        proxy_ssl_server_name on;
        proxy_ssl_protocols TLSv1.2;
    }
    server {
        listen 127.0.0.1:%%PORT_8448%%;
        proxy_pass 127.0.0.1:%%PORT_8446%%;
        proxy_ssl on;
        proxy_ssl_verify on;
        proxy_ssl_trusted_certificate ca.crt;
        proxy_ssl_name wrong.test;
    }
}
`;

let pair: Pair;

/** What a client read from `port` (empty when the server closed without data), or the handshake's failure. */
async function read(srv: RunningServer, port: number, opts: TlsClientOptions = {}): Promise<string> {
  const x = await tlsExchange(srv.port(port), { request: '', ...opts });
  if (x.error) return /alert number (\d+)/.exec(x.error)?.[0] ?? 'handshake failed';
  return x.data.toString('latin1');
}

/** A plain TCP client's read of `port` (the proxy_ssl servers listen in the clear). */
async function readPlain(srv: RunningServer, port: number): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const s = net.connect({ host: '127.0.0.1', port: srv.port(port) });
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('error', () => undefined);
    s.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
    setTimeout(() => s.destroy(), 5000).unref();
  });
}

test('stream TLS matches nginx', async (t) => {
  pair = await startPair(t, { conf, files, nginxModules: ['ngx_stream_module'] });

  await t.test('termination: protocol, SNI and empty client variables', async () => {
    const text = await same(pair, 'plain handshake', (srv) => read(srv, 8443, { servername: 'server.test' }));
    assert.match(text, /^TLSv1\.3\|server\.test\|\.\|NONE\|\|\n$/);
    await same(pair, 'TLSv1.2', (srv) => read(srv, 8443, { maxVersion: 'TLSv1.2', servername: 'x.test' }));
  });

  await t.test('a session from the shared cache is reused', async () => {
    const reuse = (srv: RunningServer) => async () => {
      const first = await tlsExchange(srv.port(8443), { request: '', maxVersion: 'TLSv1.2' });
      const second = await tlsExchange(srv.port(8443), { request: '', maxVersion: 'TLSv1.2', session: first.session });
      return { reused: second.reused, text: second.data.toString('latin1').replace(/\|[^|]*\|/, '|SNI|') };
    };
    const r = await same(pair, 'session reuse', (srv) => reuse(srv)());
    assert.equal(r.reused, true);
    assert.match(r.text, /^TLSv1\.2\|SNI\|r\|/);
  });

  await t.test('client certificates: verified, missing, from an unknown issuer', async () => {
    const withCert = (name: string): TlsClientOptions => ({ cert: certs.read(`${name}.crt`), key: certs.read(`${name}.key`) });
    const ok = await same(pair, 'good client', (srv) => read(srv, 8444, withCert('client')));
    assert.match(ok, /\|SUCCESS\|CN=client\|/);
    assert.equal(await same(pair, 'no client certificate', (srv) => read(srv, 8444)), '');
    assert.equal(await same(pair, 'unknown issuer', (srv) => read(srv, 8444, withCert('stranger'))), '');
    const lines = await same(pair, 'log lines', (srv) => waitLog(srv, /client sent no required SSL certificate|client SSL certificate verify error/));
    assert.equal(lines.length, 2);
  });

  await t.test('ssl_alpn: a common protocol is chosen, none in common fails the handshake', async () => {
    assert.match(await same(pair, 'alpn', (srv) => read(srv, 8445, { ALPNProtocols: ['x-two', 'h2'] })), /\|x-two\n$/);
    assert.equal(await same(pair, 'no alpn', (srv) => read(srv, 8445)), 'TLSv1.3||.|NONE||\n');
    assert.equal(await same(pair, 'alpn mismatch', (srv) => read(srv, 8445, { ALPNProtocols: ['h2'] })), 'alert number 120');
  });

  await t.test('proxy_ssl: verified upstream with SNI, and a name that does not match', async () => {
    assert.equal(await same(pair, 'proxy_ssl', (srv) => readPlain(srv, 8447)), 'upstream up.test TLSv1.2\n');
    assert.equal(await same(pair, 'proxy_ssl wrong name', (srv) => readPlain(srv, 8448)), '');
    const lines = await same(pair, 'proxy_ssl log', (srv) => waitLog(srv, /upstream SSL certificate does not match/));
    assert.equal(lines.length, 1);
  });
});

test('server_name: SNI chooses the stream server and its certificate (nginx ≥ 1.25.5)', async (t) => {
  const gh = await startGatehouse({
    files,
    conf: `
events {}
stream {
    ssl_certificate server.test.crt;
    ssl_certificate_key server.test.key;
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        return "default $server_name\\n";
    }
    server {
        listen 127.0.0.1:%%PORT_8443%%;
        server_name other.test *.wild.test;
        ssl_certificate other.test.crt;
        ssl_certificate_key other.test.key;
        return "other $server_name $ssl_server_name\\n";
    }
    server {
        listen 127.0.0.1:%%PORT_8443%%;
        server_name ~^(?<label>[a-z]+)\\.re\\.test$;
        return "regex $label\\n";
    }
}
`,
  });
  t.after(() => gh.stop());
  const get = async (servername?: string) => {
    const x = await tlsExchange(gh.port(8443), { request: '', servername });
    return { text: x.data.toString('latin1'), cn: x.peer?.subject };
  };
  assert.deepEqual(await get('nomatch.test'), { text: 'default \n', cn: 'CN=server.test' });
  assert.deepEqual(await get('other.test'), { text: 'other other.test other.test\n', cn: 'CN=other.test' });
  assert.deepEqual(await get('a.wild.test'), { text: 'other other.test a.wild.test\n', cn: 'CN=other.test' });
  assert.deepEqual(await get('abc.re.test'), { text: 'regex abc\n', cn: 'CN=server.test' });
});

test('pass: the connection goes on to an http listener, by SNI or decrypted (nginx ≥ 1.25.5)', async (t) => {
  const gh = await startGatehouse({
    files: { ...files, 'html/index.html': 'index\n' },
    conf: `
events {}
stream {
    log_format s $status;
    access_log %%PREFIX%%/stream.log s;
    ssl_certificate server.test.crt;
    ssl_certificate_key server.test.key;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        ssl_preread on;
        pass 127.0.0.1:%%PORT_8092%%;
    }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name tls.test;
        pass 127.0.0.1:%%PORT_8091%%;
    }
    server {
        listen 127.0.0.1:%%PORT_8443%% ssl;
        pass 127.0.0.1:%%PORT_8092%%;
    }
    server {
        listen 127.0.0.1:%%PORT_8444%% ssl;
        ssl_preread on;
        pass 127.0.0.1:%%PORT_8092%%;
    }
}
http {
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8091%% ssl;
        listen 127.0.0.1:%%PORT_8092%%;
        ssl_certificate other.test.crt;
        ssl_certificate_key other.test.key;
        location / { return 200 "http $scheme $ssl_server_name\\n"; }
    }
}
`,
  });
  t.after(() => gh.stop());
  const request = 'GET / HTTP/1.0\r\n\r\n';
  const body = (data: Buffer) => data.toString('latin1').split('\r\n\r\n')[1];
  const plain = await new Promise<Buffer>((resolve) => {
    const chunks: Buffer[] = [];
    const s = net.connect({ host: '127.0.0.1', port: gh.port(8080) }, () => s.write(request));
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('close', () => resolve(Buffer.concat(chunks)));
  });
  assert.equal(body(plain), 'http http \n');
  // ssl_preread chose the server by SNI; the TLS connection reached the https listener untouched
  const bySni = await tlsExchange(gh.port(8080), { request, servername: 'tls.test' });
  assert.equal(bySni.peer?.subject, 'CN=other.test');
  assert.equal(body(bySni.data), 'http https tls.test\n');
  // TLS terminated in stream: the decrypted connection reaches the plain listener
  const decrypted = await tlsExchange(gh.port(8443), { request });
  assert.equal(decrypted.peer?.subject, 'CN=server.test');
  assert.equal(body(decrypted.data), 'http http \n');
  // terminated, then read by ssl_preread: nginx refuses to pass it
  const refused = await tlsExchange(gh.port(8444), { request });
  assert.equal(refused.data.length, 0);
  const lines = await gh.waitForLog('error.log', /cannot pass connection with preread data/, 10_000);
  assert.ok(lines);
  // the session's access line comes as it ends, after the error line
  await gh.waitForLog('stream.log', /^500$/m, 10_000);
  assert.equal(gh.readFile('stream.log'), '500\n');
});
