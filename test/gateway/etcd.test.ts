/**
 * The gateway on a real etcd (deployment.etcd.host): the Admin API's
 * objects are etcd keys laid out as APISIX's, createdIndex/modifiedIndex
 * are etcd's create/mod revisions, a write made directly in etcd (another
 * gateway node) reaches every worker, a watch cut during writes resumes
 * from the last revision it saw, and after a network cut during which
 * etcd compacted its history, the workers re-list and apply only what
 * changed. The gateway talks to etcd through a relay the test can cut.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { etcdSkip, etcdYaml, gatewayStatus, startEtcd, startRelay, waitForStatus } from './etcd-kit.ts';
import type { Etcd, Relay } from './etcd-kit.ts';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';

const upstream = { nodes: { '127.0.0.1:8080': 1 }, type: 'roundrobin' };

interface One { key: string; value: Record<string, unknown>; createdIndex: number; modifiedIndex: number }

describe('the etcd store', { skip: etcdSkip }, () => {
  let etcd: Etcd;
  let relay: Relay;
  let gw: Gateway;
  before(async () => {
    etcd = await startEtcd();
    relay = await startRelay(etcd.port);
    gw = await startGateway({ yaml: etcdYaml(`http://127.0.0.1:${relay.port}`) });
  });
  after(async () => {
    await gw?.stop();
    await relay?.close();
    await etcd?.destroy();
  });

  it('PUT/GET/list/PATCH/DELETE: etcd keys and revisions are the Admin API\'s', async () => {
    const put = await gw.admin('PUT', '/gateway/admin/routes/1', { uri: '/a', upstream });
    assert.equal(put.status, 201, put.text);
    const inEtcd = await etcd.get('/gateway/routes/1');
    assert.ok(inEtcd);
    assert.deepEqual(JSON.parse(inEtcd.value), (put.json as One).value);

    const got = (await gw.admin('GET', '/gateway/admin/routes/1')).json as One;
    assert.equal(got.key, '/gateway/routes/1');
    assert.equal(got.createdIndex, inEtcd.create_revision);
    assert.equal(got.modifiedIndex, inEtcd.mod_revision);

    const again = await gw.admin('PUT', '/gateway/admin/routes/1', { uri: '/b', upstream });
    assert.equal(again.status, 200);
    const after2 = (await etcd.get('/gateway/routes/1'))!;
    const got2 = (await gw.admin('GET', '/gateway/admin/routes/1')).json as One;
    assert.equal(got2.createdIndex, inEtcd.create_revision);
    assert.equal(got2.modifiedIndex, after2.mod_revision);
    assert.ok(after2.mod_revision > inEtcd.mod_revision);

    const patch = await gw.admin('PATCH', '/gateway/admin/routes/1', { desc: 'patched' });
    assert.equal(patch.status, 200, patch.text);
    assert.equal(JSON.parse((await etcd.get('/gateway/routes/1'))!.value).desc, 'patched');

    const post = await gw.admin('POST', '/gateway/admin/routes', { uri: '/p', upstream });
    assert.equal(post.status, 201);
    const postKey = (post.json as One).key;
    const posted = (await etcd.get(postKey))!;
    // the generated id is the revision of the write to /gen_id, as APISIX's
    assert.equal(postKey, `/gateway/routes/${String(posted.mod_revision - 1).padStart(20, '0')}`);

    const list = (await gw.admin('GET', '/gateway/admin/routes')).json as { total: number; list: One[] };
    assert.equal(list.total, 2);
    for (const item of list.list) {
      const kv = (await etcd.get(item.key))!;
      assert.equal(item.createdIndex, kv.create_revision);
      assert.equal(item.modifiedIndex, kv.mod_revision);
    }

    const del = await gw.admin('DELETE', postKey.replace('/gateway/', '/gateway/admin/'));
    assert.deepEqual(del.json, { deleted: '1', key: postKey });
    assert.equal(await etcd.get(postKey), undefined);
    assert.equal((await gw.admin('GET', postKey.replace('/gateway/', '/gateway/admin/'))).status, 404);
  });

  it('APISIX\'s directory placeholders (`apisix init_etcd`) are not listed', async () => {
    await etcd.put('/gateway/services/', 'init_dir');
    const r = await gw.admin('GET', '/gateway/admin/services');
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, { list: [], total: 0 });
  });

  it('?ttl= is an etcd lease', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/upstreams/short?ttl=60', upstream);
    assert.equal(r.status, 201);
    const kv = (await etcd.get('/gateway/upstreams/short'))!;
    assert.ok(kv.lease !== undefined && kv.lease !== '0', JSON.stringify(kv));
  });

  it('one watch for all the workers of the gateway', async () => {
    await waitForStatus(gw, (st) => st.workers.length === 2 && st.workers.every((w) => w.error === undefined));
    assert.equal(await etcd.watchers(), 1);
  });

  it('a write made directly in etcd (another node) reaches every worker', async () => {
    const value = { id: 'ext', uri: '/ext', upstream, create_time: 1, update_time: 1 };
    const rev = await etcd.put('/gateway/routes/ext', JSON.stringify(value));
    const s = await waitForStatus(gw, (st) => st.workers.length === 2 && st.workers.every((w) => w.revision >= rev));
    assert.equal(s.store, 'etcd');
    assert.ok(s.store_revision! >= rev);
    const got = (await gw.admin('GET', '/gateway/admin/routes/ext')).json as One;
    assert.deepEqual(got.value, value);
    assert.equal(got.createdIndex, rev);

    const gone = await etcd.delete('/gateway/routes/ext');
    const keys = s.workers[0].keys;
    await waitForStatus(gw, (st) => st.workers.every((w) => w.revision >= gone && w.keys === keys - 1));
  });

  it('writes under another prefix (another cluster on the same etcd) do not make the workers look behind', async () => {
    const mine = await etcd.put('/gateway/routes/mine', JSON.stringify({ id: 'mine', uri: '/mine', upstream }));
    await waitForStatus(gw, (st) => st.workers.every((w) => w.revision >= mine));
    let other = 0;
    for (let i = 0; i < 3; i++) other = await etcd.put(`/other-cluster/routes/${i}`, '{}');
    const s = await gatewayStatus(gw);
    assert.equal(s.store_revision, other);
    for (const w of s.workers) assert.equal(w.revision, other, JSON.stringify(s));
    // and what comes after is applied as usual
    const gone = await etcd.delete('/gateway/routes/mine');
    await waitForStatus(gw, (st) => st.workers.every((w) => w.revision >= gone));
    assert.equal((await gw.admin('GET', '/gateway/admin/routes/mine')).status, 404);
  });

  it('a watch cut again and again during a stream of writes resumes from the last revision it saw: nothing lost, no re-listing', async () => {
    const before = await waitForStatus(gw, (st) => st.workers.every((w) => w.revision === st.store_revision));
    let last = 0;
    for (let i = 0; i < 60; i++) {
      if (i % 10 === 3) relay.cut();
      last = await etcd.put(`/gateway/routes/s${i}`, JSON.stringify({ id: `s${i}`, uri: `/s${i}`, upstream }));
      if (i % 10 === 7) relay.mend();
    }
    const s = await waitForStatus(gw, (st) => st.workers.every((w) => w.revision >= last && w.error === undefined));
    s.workers.forEach((w, i) => {
      assert.equal(w.keys, before.workers[i].keys + 60, JSON.stringify(s));
      assert.equal(w.relists, before.workers[i].relists, JSON.stringify(s));
    });
  });

  it('an Admin API write reaches every worker (figure)', async (t) => {
    const delays: number[] = [];
    for (let i = 0; i < 30; i++) {
      const r = await gw.admin('PUT', `/gateway/admin/upstreams/f${i}`, upstream);
      assert.equal(r.status, 201);
      const written = Date.now();
      const rev = (await etcd.get(`/gateway/upstreams/f${i}`))!.mod_revision;
      await waitForStatus(gw, (st) => st.workers.every((w) => w.revision >= rev));
      delays.push(Date.now() - written);
    }
    delays.sort((a, b) => a - b);
    t.diagnostic(`etcd: write → every worker: p50 ${delays[Math.floor(delays.length / 2)]} ms, p99 ${delays[Math.ceil(delays.length * 0.99) - 1]} ms (${delays.length} writes, 2 workers)`);
  });

  it('after a network cut during which etcd compacted, workers re-list and apply only what changed', async () => {
    for (let i = 0; i < 5; i++) assert.equal((await gw.admin('PUT', `/gateway/admin/upstreams/u${i}`, upstream)).status, 201);
    const before = await waitForStatus(gw, (st) => st.workers.every((w) => w.revision === st.store_revision));
    const keys = before.workers[0].keys;
    const relists = before.workers[0].relists;

    relay.cut();
    const down = await gw.admin('GET', '/gateway/admin/upstreams/u0');
    assert.equal(down.status, 503);
    assert.match((down.json as { error_msg: string }).error_msg, /^etcd unavailable: /);
    // meanwhile, other nodes change three keys and etcd compacts its history
    await etcd.put('/gateway/upstreams/new', JSON.stringify({ ...upstream, id: 'new' }));
    await etcd.put('/gateway/upstreams/u1', JSON.stringify({ ...upstream, id: 'u1', desc: 'changed' }));
    await etcd.delete('/gateway/upstreams/u2');
    const compacted = await etcd.compact();
    relay.mend();

    const s = await waitForStatus(gw, (st) => st.workers.every((w) => w.revision >= compacted && w.error === undefined));
    for (const w of s.workers) {
      assert.equal(w.relists, relists + 1, JSON.stringify(s));
      assert.equal(w.last_relist_changes, 3, JSON.stringify(s));
      assert.equal(w.keys, keys, JSON.stringify(s));
    }
    const got = (await gw.admin('GET', '/gateway/admin/upstreams/u1')).json as One;
    assert.equal(got.value.desc, 'changed');

    // and the watch goes on after the re-listing
    const rev = await etcd.put('/gateway/upstreams/later', JSON.stringify({ ...upstream, id: 'later' }));
    await waitForStatus(gw, (st) => st.workers.every((w) => w.revision >= rev && w.keys === keys + 1));
    assert.equal((await gatewayStatus(gw)).store_revision, rev);
  });

  it('etcd replaced behind the same address (wiped, restored from a backup): workers re-list and hold the new one\'s configuration', async () => {
    const before = await waitForStatus(gw, (st) => st.workers.every((w) => w.revision === st.store_revision));
    const other = await startEtcd();
    try {
      let rev = 0;
      for (const id of ['x', 'y']) rev = await other.put(`/gateway/routes/${id}`, JSON.stringify({ id, uri: `/${id}`, upstream }));
      assert.ok(rev < before.store_revision!);
      relay.cut();
      relay.target = other.port;
      relay.mend();
      const s = await waitForStatus(gw, (st) => st.workers.every((w) => w.revision === rev && w.keys === 2 && w.error === undefined));
      s.workers.forEach((w, i) => assert.equal(w.relists, before.workers[i].relists + 1));
      assert.equal((await gw.admin('GET', '/gateway/admin/routes/1')).status, 404);
      assert.equal((await gw.admin('GET', '/gateway/admin/routes/x')).status, 200);
    } finally {
      relay.target = etcd.port;
      await other.destroy();
    }
  });

  it('after a reload the new workers get changes, and the watch passes to them when the old ones retire', async () => {
    const file = path.join(gw.prefix, 'conf', 'config.yaml');
    const newKey = 'keyOfTheReloadedConfigurationXYZ';
    fs.writeFileSync(file, fs.readFileSync(file, 'utf8').replace('        role: viewer\n', `        role: viewer\n      - name: added\n        key: ${newKey}\n        role: admin\n`));
    gw.child.kill('SIGHUP');
    // the new configuration answers once the reload is through (a request on a connection the old workers close is asked again)
    const deadline = Date.now() + 20_000;
    for (;;) {
      const r = await gw.admin('GET', '/gateway/admin/routes', undefined, { 'X-API-KEY': newKey }).catch(() => undefined);
      if (r?.status === 200) break;
      assert.ok(Date.now() < deadline, 'the reload never came through');
    }
    const rev = await etcd.put('/gateway/routes/after-reload', JSON.stringify({ id: 'after-reload', uri: '/r', upstream }));
    await waitForStatus(gw, (st) => st.workers.length === 2 && st.workers.every((w) => w.revision >= rev));
    const got = await gw.admin('GET', '/gateway/admin/routes/after-reload', undefined, { 'X-API-KEY': newKey });
    assert.equal(got.status, 200);
    // the retired workers' watch ends; one remains
    const until = Date.now() + 20_000;
    while (await etcd.watchers() !== 1) {
      assert.ok(Date.now() < until, `${await etcd.watchers()} watches`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const later = await etcd.put('/gateway/routes/later-still', JSON.stringify({ id: 'later-still', uri: '/l', upstream }));
    await waitForStatus(gw, (st) => st.workers.every((w) => w.revision >= later));
  });
});
