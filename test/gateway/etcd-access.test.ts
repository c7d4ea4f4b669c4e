/**
 * The gateway on an etcd with authentication on (deployment.etcd.user /
 * password): its requests and its watch carry a token, taken again after
 * an etcd restart forgets it; a wrong password is the Admin API's 503 with
 * etcd's own reason. And on an etcd over TLS that requires client
 * certificates (deployment.etcd.tls, apisix.ssl.ssl_trusted_certificate).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { etcdSkip, etcdYaml, startEtcd, waitForStatus } from './etcd-kit.ts';
import type { Etcd } from './etcd-kit.ts';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { CertFactory } from '../tls/certs.ts';

const upstream = { nodes: { '127.0.0.1:8080': 1 }, type: 'roundrobin' };

describe('etcd with authentication', { skip: etcdSkip }, () => {
  let etcd: Etcd;
  let gw: Gateway | undefined;
  before(async () => {
    etcd = await startEtcd();
    await etcd.enableAuth('root', 'root-secret');
  });
  after(async () => {
    await gw?.stop();
    await etcd?.destroy();
  });

  it('user and password: Admin API writes and the watch work, also after an etcd restart', async () => {
    gw = await startGateway({ yaml: etcdYaml(etcd.url, 2, '    user: root\n    password: root-secret\n') });
    const put = await gw.admin('PUT', '/gateway/admin/upstreams/1', upstream);
    assert.equal(put.status, 201, put.text);
    const kv = (await etcd.get('/gateway/upstreams/1'))!;
    assert.equal(((await gw.admin('GET', '/gateway/admin/upstreams/1')).json as { modifiedIndex: number }).modifiedIndex, kv.mod_revision);

    const rev = await etcd.put('/gateway/upstreams/2', JSON.stringify({ ...upstream, id: '2' }));
    await waitForStatus(gw, (st) => st.workers.length === 2 && st.workers.every((w) => w.revision >= rev));

    await etcd.stop();
    await etcd.start();
    const again = await etcd.put('/gateway/upstreams/3', JSON.stringify({ ...upstream, id: '3' }));
    await waitForStatus(gw, (st) => st.workers.every((w) => w.revision >= again && w.keys === 3 && w.error === undefined));
    assert.equal((await gw.admin('PUT', '/gateway/admin/upstreams/4', upstream)).status, 201);
    await gw.stop();
    gw = undefined;
  });

  it('a wrong password: 503 with etcd\'s reason, the gateway stays up', async () => {
    gw = await startGateway({ yaml: etcdYaml(etcd.url, 1, '    user: root\n    password: wrong\n') });
    const r = await gw.admin('GET', '/gateway/admin/upstreams/1');
    assert.equal(r.status, 503);
    assert.deepEqual(r.json, { error_msg: 'etcdserver: authentication failed, invalid user ID or password' });
    const s = await waitForStatus(gw, (st) => st.workers[0].error !== undefined);
    assert.equal(s.workers[0].keys, 0);
  });
});

describe('etcd over TLS with client certificates', { skip: etcdSkip }, () => {
  let etcd: Etcd;
  let gw: Gateway | undefined;
  let certs: CertFactory;
  before(async () => {
    certs = new CertFactory(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-etcd-certs-')));
    certs.selfSigned('ca');
    certs.signed('server', 'ca', { leaf: true, subject: '/CN=localhost/' });
    certs.signed('client', 'ca', { leaf: true, subject: '/CN=gateway/' });
    etcd = await startEtcd({
      cert: certs.file('server.crt'), key: certs.file('server.key'), ca: certs.file('ca.crt'),
      clientCert: certs.file('client.crt'), clientKey: certs.file('client.key'),
    });
  });
  after(async () => {
    await gw?.stop();
    await etcd?.destroy();
    fs.rmSync(certs.dir, { recursive: true, force: true });
  });

  it('https host, client certificate, CA and sni: writes and the watch work', async () => {
    const yaml = etcdYaml(etcd.url, 2, [
      '    tls:',
      `      cert: ${certs.file('client.crt')}`,
      `      key: ${certs.file('client.key')}`,
      '      sni: localhost',
      '',
    ].join('\n')).replace('apisix:\n', `apisix:\n  ssl:\n    ssl_trusted_certificate: ${certs.file('ca.crt')}\n`);
    gw = await startGateway({ yaml });
    const put = await gw.admin('PUT', '/gateway/admin/upstreams/1', upstream);
    assert.equal(put.status, 201, put.text);
    const rev = await etcd.put('/gateway/upstreams/2', JSON.stringify({ ...upstream, id: '2' }));
    const s = await waitForStatus(gw, (st) => st.workers.length === 2 && st.workers.every((w) => w.revision >= rev && w.keys === 2));
    assert.equal(s.store_error, undefined);
  });

  it('without the CA the gateway refuses etcd\'s certificate: 503', async () => {
    await gw?.stop();
    gw = await startGateway({ yaml: etcdYaml(etcd.url, 1, `    tls:\n      cert: ${certs.file('client.crt')}\n      key: ${certs.file('client.key')}\n`) });
    const r = await gw.admin('GET', '/gateway/admin/upstreams/1');
    assert.equal(r.status, 503);
    assert.match((r.json as { error_msg: string }).error_msg, /^etcd unavailable: https:\/\/127\.0\.0\.1:\d+: (self[- ]signed certificate|unable to verify)/);
  });
});
