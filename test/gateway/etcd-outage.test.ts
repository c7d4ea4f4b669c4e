/**
 * etcd stopped and started again under a running gateway, and a gateway
 * restarted while etcd is down: the gateway stays up and keeps its last
 * configuration, the Admin API answers 503 with a clear error, the status
 * endpoint still answers; a start with etcd down serves the snapshot the
 * workers saved; etcd back, changes flow again without a restart. Under a
 * steady stream of proxied requests, etcd going away and coming back fails none.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { etcdSkip, etcdYaml, gatewayStatus, startEtcd, waitForStatus } from './etcd-kit.ts';
import type { Etcd } from './etcd-kit.ts';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { startOrigin } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';

describe('etcd outages', { skip: etcdSkip }, () => {
  let etcd: Etcd;
  let gw: Gateway;
  let origin: Origin;
  let upstream: { nodes: Record<string, number>; type: string };
  before(async () => {
    origin = await startOrigin();
    upstream = { nodes: { [origin.node]: 1 }, type: 'roundrobin' };
    etcd = await startEtcd();
    gw = await startGateway({ yaml: etcdYaml(etcd.url) });
  });
  after(async () => {
    await gw?.stop();
    await etcd?.destroy();
    await origin?.close();
  });

  it('etcd stopped: the Admin API answers 503, the gateway stays up with its configuration; etcd back: writes and changes flow again', async () => {
    for (let i = 0; i < 3; i++) assert.equal((await gw.admin('PUT', `/gateway/admin/routes/r${i}`, { uri: `/r${i}`, upstream })).status, 201);
    const before = await waitForStatus(gw, (st) => st.workers.length === 2 && st.workers.every((w) => w.revision === st.store_revision));

    await etcd.stop();
    const r = await gw.admin('PUT', '/gateway/admin/routes/r9', { uri: '/r9', upstream });
    assert.equal(r.status, 503);
    assert.match((r.json as { error_msg: string }).error_msg, /^etcd unavailable: http:\/\/127\.0\.0\.1:\d+: connect ECONNREFUSED/);
    assert.equal((await gw.admin('GET', '/gateway/admin/routes/r0')).status, 503);
    const down = await waitForStatus(gw, (st) => st.workers.every((w) => w.error !== undefined));
    assert.equal(down.store_revision, null);
    assert.match(down.store_error!, /^etcd unavailable/);
    for (const w of down.workers) {
      assert.equal(w.revision, before.workers[0].revision);
      assert.equal(w.keys, 3);
    }
    // the data plane routes by the configuration it has
    assert.equal((await fetch(`http://127.0.0.1:${gw.proxyPort}/r0`)).status, 200);

    await etcd.start();
    // the watch comes back by itself and resumes where it was: a write by another node arrives
    const rev = await etcd.put('/gateway/routes/other', JSON.stringify({ id: 'other', uri: '/other', upstream }));
    const up = await waitForStatus(gw, (st) => st.workers.every((w) => w.revision >= rev && w.error === undefined));
    for (const w of up.workers) assert.equal(w.keys, 4);
    const again = await gw.admin('PUT', '/gateway/admin/routes/r9', { uri: '/r9', upstream });
    assert.equal(again.status, 201, again.text);
  });

  it('a gateway restarted while etcd is down serves its snapshot, and catches up when etcd is back', async () => {
    const settled = await waitForStatus(gw, (st) => st.workers.every((w) => w.revision === st.store_revision));
    const keys = settled.workers[0].keys;
    await gw.stop();
    const snapshot = JSON.parse(fs.readFileSync(path.join(gw.prefix, 'data', 'etcd-snapshot.json'), 'utf8')) as { revision: number; kvs: unknown[] };
    assert.equal(snapshot.revision, settled.store_revision);
    assert.equal(snapshot.kvs.length, keys);

    // another node changes one key while this gateway is down, then etcd goes down too
    const changed = await etcd.put('/gateway/routes/r1', JSON.stringify({ id: 'r1', uri: '/changed', upstream }));
    await etcd.stop();

    gw = await startGateway({ prefix: gw.prefix });
    const s = await gatewayStatus(gw);
    assert.equal(s.workers.length, 2);
    for (const w of s.workers) {
      assert.equal(w.revision, snapshot.revision);
      assert.equal(w.keys, keys);
    }
    assert.match(s.store_error!, /^etcd unavailable/);
    assert.equal((await gw.admin('GET', '/gateway/admin/routes/r1')).status, 503);
    // and routes by the snapshot
    assert.equal((await fetch(`http://127.0.0.1:${gw.proxyPort}/r0`)).status, 200);

    await etcd.start();
    const up = await waitForStatus(gw, (st) => st.workers.every((w) => w.revision >= changed && w.error === undefined));
    for (const w of up.workers) {
      assert.equal(w.keys, keys);
      assert.equal(w.relists, 1);
      assert.equal(w.last_relist_changes, 1);
    }
    const got = await gw.admin('GET', '/gateway/admin/routes/r1');
    assert.equal((got.json as { value: { uri: string } }).value.uri, '/changed');
  });
  it('etcd stopped and started under load: no data-plane request fails', async () => {
    assert.equal((await gw.admin('PUT', '/gateway/admin/routes/load', { uri: '/load', upstream })).status, 201);
    await waitForStatus(gw, (st) => st.workers.every((w) => w.revision === st.store_revision && w.error === undefined));
    let done = false;
    let answered = 0;
    const failures: string[] = [];
    const client = async () => {
      while (!done) {
        try {
          const r = await fetch(`http://127.0.0.1:${gw.proxyPort}/load`);
          await r.arrayBuffer();
          if (r.status === 200) answered++;
          else failures.push(`status ${r.status}`);
        } catch (e) {
          failures.push(String(e));
        }
      }
    };
    const clients = Array.from({ length: 4 }, client);
    const waitAnswers = async (n: number) => {
      const target = answered + n;
      while (answered < target && failures.length === 0) await new Promise((resolve) => setImmediate(resolve));
    };
    await waitAnswers(50);
    await etcd.stop();
    await waitForStatus(gw, (st) => st.workers.every((w) => w.error !== undefined));
    const duringOutage = answered;
    await waitAnswers(200);
    assert.ok(answered - duringOutage >= 200 || failures.length > 0);
    await etcd.start();
    const rev = await etcd.put('/gateway/routes/after-outage', JSON.stringify({ id: 'after-outage', uri: '/after-outage', upstream }));
    await waitForStatus(gw, (st) => st.workers.every((w) => w.revision >= rev && w.error === undefined));
    await waitAnswers(50);
    done = true;
    await Promise.all(clients);
    assert.deepEqual(failures, []);
    assert.equal((await fetch(`http://127.0.0.1:${gw.proxyPort}/after-outage`)).status, 200);
  });
});
