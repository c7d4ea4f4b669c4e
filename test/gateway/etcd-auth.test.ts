/**
 * The gateway on an etcd with authentication on (deployment.etcd.user /
 * password): its requests and its watch carry a token, taken again after
 * an etcd restart forgets it; a wrong password is the Admin API's 503 with
 * etcd's own reason.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { etcdSkip, etcdYaml, startEtcd, waitForStatus } from './etcd-kit.ts';
import type { Etcd } from './etcd-kit.ts';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';

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
