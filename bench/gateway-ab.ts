/**
 * Two Gatehouse builds' gateways side by side, at the same time, beside this
 * tree's proxy_pass (the bar of bench/gateway-route.ts): `node
 * bench/gateway-ab.ts OTHER_TREE` starts OTHER_TREE's gateway (A, through
 * that tree's test harness and bin/gatehouse) and this tree's (B) with the
 * routes of gateway-route.ts, all three pinned to the proxy core, and in
 * each round drives the three with wrk at once (the route with no plugins,
 * then the one with basic-auth + limit-count + prometheus). Servers
 * measured over the same seconds see the same load, so A/proxy_pass,
 * B/proxy_pass and B/A hold on a machine others are using, where
 * separate runs move by tens of percent. Prints each round and the medians.
 *
 * BENCH_ROUNDS (5), BENCH_SECONDS (5).
 */
import path from 'node:path';
import { startGatehouse, freePort } from '../test/kit/server.ts';
import { cpuPerRequest, proxyPassConf, setUpRoutes, AUTH } from './gateway-route.ts';
import { pinTree, PROXY_CORE, startOrigin, wrap } from './servers.ts';

const other = process.argv[2];
if (!other) {
  console.error('usage: node bench/gateway-ab.ts OTHER_TREE   (a checkout of another commit, with node_modules)');
  process.exit(2);
}
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const seconds = Number(process.env.BENCH_SECONDS ?? 5);

type Harness = typeof import('../test/gateway/harness.ts');
const quiet = (h: Harness) => h.defaultYaml(1).replace('  error_log_level: info', '  error_log_level: error');

const origin = await startOrigin();
const ppPort = await freePort();
const pp = await wrap('gatehouse', await startGatehouse({ conf: proxyPassConf(ppPort, origin.port), errorLogLevel: 'error', timeoutMs: 60000 }), ppPort, PROXY_CORE);
const otherHarness = await import(path.resolve(other, 'test/gateway/harness.ts')) as Harness;
const ownHarness = await import('../test/gateway/harness.ts');
const gws = [
  await otherHarness.startGateway({ yaml: quiet(otherHarness) }),
  await ownHarness.startGateway({ yaml: quiet(ownHarness) }),
];
for (const [i, gw] of gws.entries()) {
  pinTree(gw.child.pid!, PROXY_CORE);
  await setUpRoutes(gw, origin.port, [otherHarness, ownHarness][i].ADMIN_KEY);
}

const cases = [['no plugins', '/small', [] as string[]], ['basic-auth+limit-count+prometheus', '/plugged', [AUTH]]] as const;
// a run with no answers (NaN) is left out
const finite = (v: number[]) => v.filter(Number.isFinite);
const median = (v: number[]) => { const f = finite(v).sort((x, y) => x - y); return f[f.length >> 1]; };
const at = (path: string, headers: readonly string[], s: number) => Promise.all([
  cpuPerRequest(pp.pid, ppPort, '/small', s),
  ...gws.map((gw) => cpuPerRequest(gw.child.pid!, gw.proxyPort, path, s, [...headers])),
]);
console.log(`A: ${other}, B: this tree, against this tree's proxy_pass; ${rounds} rounds of ${seconds} s, the three at once`);
try {
  for (const [, p, h] of cases) await at(p, h, 3);
  const out = new Map<string, { a: number[]; b: number[]; ba: number[] }>();
  for (let i = 0; i < rounds; i++) {
    for (const [name, p, h] of cases) {
      const [c, a, b] = await at(p, h, seconds);
      const o = out.get(name) ?? { a: [], b: [], ba: [] };
      o.a.push(a / c);
      o.b.push(b / c);
      o.ba.push(b / a);
      out.set(name, o);
      console.log(`  round ${i + 1} ${name}: proxy_pass ${c.toFixed(1)} µs  A ${a.toFixed(1)} µs  B ${b.toFixed(1)} µs  A/pp ${(a / c).toFixed(2)}  B/pp ${(b / c).toFixed(2)}  B/A ${(b / a).toFixed(3)}`);
    }
  }
  for (const [name, o] of out) {
    console.log(`${name}: A/proxy_pass ${median(o.a).toFixed(2)}×  B/proxy_pass ${median(o.b).toFixed(2)}×  B/A ${median(o.ba).toFixed(3)} (rounds ${Math.min(...finite(o.ba)).toFixed(3)}–${Math.max(...finite(o.ba)).toFixed(3)}, ${finite(o.ba).length} of ${o.ba.length})`);
  }
} finally {
  for (const gw of gws) await gw.stop();
  await pp.stop();
  await origin.stop();
}
process.exit(0);
