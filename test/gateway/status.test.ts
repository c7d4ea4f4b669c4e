/**
 * The status endpoint on the admin listener shows the store's revision and
 * each worker's, and every worker catches up with an Admin API write. The
 * time from a write's answer to the moment all workers report it is
 * printed (p50/p99) as a figure, not asserted (it depends on the machine's load).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';

interface Status { store: string; store_revision: number; workers: Array<{ worker: number; revision: number }> }

let gw: Gateway;
before(async () => { gw = await startGateway({ workers: 2 }); });
after(async () => { await gw.stop(); });

async function status(): Promise<Status> {
  const r = await fetch(`http://127.0.0.1:${gw.adminPort}/gateway/status`);
  assert.equal(r.status, 200);
  return await r.json() as Status;
}

describe('/gateway/status', () => {
  it('lists every worker with its revision beside the store\'s, and all catch up with each write', async (t) => {
    const delays: number[] = [];
    for (let i = 0; i < 30; i++) {
      const r = await gw.admin('PUT', `/gateway/admin/upstreams/s${i}`, { nodes: { '127.0.0.1:80': 1 }, type: 'roundrobin' });
      assert.equal(r.status, 201);
      const written = Date.now();
      const got = await gw.admin('GET', `/gateway/admin/upstreams/s${i}`);
      const rev = (got.json as { modifiedIndex: number }).modifiedIndex;
      for (;;) {
        const s = await status();
        assert.equal(s.store, 'sqlite');
        assert.ok(s.store_revision >= rev);
        assert.equal(s.workers.length, 2, JSON.stringify(s));
        if (s.workers.every((w) => w.revision >= rev)) break;
      }
      delays.push(Date.now() - written);
    }
    delays.sort((a, b) => a - b);
    t.diagnostic(`write → every worker: p50 ${delays[Math.floor(delays.length / 2)]} ms, p99 ${delays[Math.ceil(delays.length * 0.99) - 1]} ms (${delays.length} writes, 2 workers)`);
  });
});
