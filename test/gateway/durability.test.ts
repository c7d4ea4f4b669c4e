/**
 * Every Admin API write that got a 2xx survives `kill -9` of the gateway:
 * a stream of PUTs from several clients, the master killed in the middle,
 * a restart on the same prefix, and each acknowledged route read back
 * (with the embedded store and with etcd).
 * Also: a bad body is a 400 that changes nothing in the store.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { etcdSkip, etcdYaml, startEtcd } from './etcd-kit.ts';
import { startGateway } from './harness.ts';

const upstream = { nodes: { '127.0.0.1:8080': 1 }, type: 'roundrobin' };

describe('durability of acknowledged writes', () => {
  it('kill -9 during a stream of PUTs loses none that were answered 2xx', async () => {
    await killDuringWrites();
  });

  it('the same with the store in etcd', { skip: etcdSkip }, async () => {
    const etcd = await startEtcd();
    try {
      await killDuringWrites(etcdYaml(etcd.url));
    } finally {
      await etcd.destroy();
    }
  });

  it('a bad body is a 400 and the stored object and revisions stay as they were', async () => {
    const gw = await startGateway();
    try {
      await gw.admin('PUT', '/gateway/admin/upstreams/1', upstream);
      const before = await gw.admin('GET', '/gateway/admin/upstreams/1');
      const bad = [
        { nodes: { '127.0.0.1:8080': '1' }, type: 'roundrobin' },
        { nodes: { '127.0.0.1:8080': 1 }, type: 'chash' },
        { nodes: { '127.0.0.1:8080': 1 }, pass_host: 'rewrite' },
      ];
      const answers = [];
      for (const body of bad) answers.push(await gw.admin('PUT', '/gateway/admin/upstreams/1', body));
      assert.deepEqual(answers.map((a) => [a.status, a.json]), [
        [400, { error_msg: 'invalid configuration: property "nodes" validation failed: object matches none of the required' }],
        [400, { error_msg: 'missing key' }],
        [400, { error_msg: "`upstream_host` can't be empty when `pass_host` is `rewrite`" }],
      ]);
      const patched = await gw.admin('PATCH', '/gateway/admin/upstreams/1', { retries: -1 });
      assert.deepEqual([patched.status, patched.json], [400, { error_msg: 'invalid configuration: property "retries" validation failed: expected -1 to be at least 0' }]);
      const after = await gw.admin('GET', '/gateway/admin/upstreams/1');
      assert.deepEqual(after.json, before.json);
    } finally {
      await gw.stop();
    }
  });
});

/** PUTs from four clients, the master killed with -9 in the middle, a restart on the same prefix: every 2xx is there. */
async function killDuringWrites(yaml?: string): Promise<void> {
  const gw = await startGateway({ workers: 2, yaml });
  const acked = new Map<string, string>();
  let killed = false;
  const writer = async (w: number): Promise<void> => {
    for (let i = 0; !killed; i++) {
      const id = `w${w}-${i}`;
      const desc = `write ${i} of writer ${w}`;
      try {
        const r = await gw.admin('PUT', `/gateway/admin/routes/${id}`, { uri: `/${id}`, desc, upstream });
        if (r.status === 201 || r.status === 200) acked.set(id, desc);
      } catch {
        return; // the connection died with the server
      }
    }
  };
  const writers = [0, 1, 2, 3].map(writer);
  // kill once a good number of writes were acknowledged (an event, not a delay)
  while (acked.size < 200) await new Promise((r) => setImmediate(r));
  await gw.kill9();
  killed = true;
  await Promise.all(writers);

  const again = await startGateway({ prefix: gw.prefix });
  try {
    const list = await again.admin('GET', '/gateway/admin/routes');
    const stored = new Map((list.json as { list: Array<{ value: { id: string; desc: string } }> }).list.map((x) => [x.value.id, x.value.desc]));
    const lost = [...acked].filter(([id, desc]) => stored.get(id) !== desc);
    assert.deepEqual(lost, [], `${lost.length} of ${acked.size} acknowledged writes lost`);
    assert.ok(acked.size >= 200);
  } finally {
    await again.stop();
  }
}
