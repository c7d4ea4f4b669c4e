/**
 * The gateway's propagation figure (issue #10): how long after an Admin API
 * write is acknowledged every worker runs the new configuration, with the
 * embedded store and with etcd, while wrk loads the data plane. Gatehouse
 * alone (APISIX is not on the machine); figures, not a comparison.
 *
 * A write's delay is the time from its 2xx to the first status answer in
 * which every worker's revision has reached the write's (/gateway/status,
 * polled every 2 ms).
 */
import fs from 'node:fs';
import { startGateway, defaultYaml, type Gateway } from '../test/gateway/harness.ts';
import { etcdSkip, etcdYaml, gatewayStatus, startEtcd } from '../test/gateway/etcd-kit.ts';
import { wrkRun } from './cases.ts';

const WRITES = 100;
const WORKERS = 2;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * p) - 1)];
}

async function measure(gw: Gateway, seconds: number): Promise<{ p50: number; p99: number; max: number }> {
  const load = wrkRun(gw.proxyPort, '/bench', seconds, 20);
  const delays: number[] = [];
  // each write is one store revision (a PUT's answer carries no index)
  let revision = (await gatewayStatus(gw)).store_revision ?? 0;
  for (let i = 0; i < WRITES; i++) {
    const reply = await gw.admin('PUT', '/gateway/admin/routes/bench', { uri: `/bench/${i}`, upstream: { nodes: { '127.0.0.1:1': 1 }, type: 'roundrobin' } });
    const acked = performance.now();
    if (reply.status >= 300) throw new Error(`PUT: ${reply.status} ${reply.text}`);
    revision++;
    for (;;) {
      const s = await gatewayStatus(gw);
      if (s.workers.length === WORKERS && s.workers.every((w) => w.revision >= revision)) break;
      await new Promise((r) => setTimeout(r, 2));
    }
    delays.push(performance.now() - acked);
  }
  await load;
  delays.sort((a, b) => a - b);
  return { p50: percentile(delays, 0.5), p99: percentile(delays, 0.99), max: delays[delays.length - 1] };
}

/** Prints the propagation figures for the embedded store and (when etcd is installed) etcd. */
export async function gatewayCase(seconds: number): Promise<void> {
  console.log(`\ngateway: Admin API write → every worker (${WORKERS} workers, ${WRITES} writes, wrk -c20 on the data plane)`);
  const stores: Array<[string, () => Promise<{ gw: Gateway; stop: () => Promise<void> }>]> = [
    ['embedded (SQLite)', async () => {
      const gw = await startGateway({ yaml: defaultYaml(WORKERS) });
      return { gw, stop: () => gw.stop() };
    }],
  ];
  if (!etcdSkip) {
    stores.push(['etcd', async () => {
      const etcd = await startEtcd();
      const gw = await startGateway({ yaml: etcdYaml(etcd.url, WORKERS) });
      return { gw, stop: async () => { await gw.stop(); await etcd.stop(); } };
    }]);
  } else {
    console.log(`  etcd: skipped (${etcdSkip})`);
  }
  for (const [name, start] of stores) {
    const { gw, stop } = await start();
    try {
      const f = await measure(gw, seconds);
      console.log(`  ${name.padEnd(18)} p50 ${f.p50.toFixed(1)} ms, p99 ${f.p99.toFixed(1)} ms, max ${f.max.toFixed(1)} ms (bar: p99 ≤ 100 ms)`);
    } finally {
      await stop();
      fs.rmSync(gw.prefix, { recursive: true, force: true });
    }
  }
}
