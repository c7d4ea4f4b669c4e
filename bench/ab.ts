/**
 * Two Gatehouse builds side by side, at the same time: `node bench/ab.ts
 * OTHER_TREE` runs OTHER_TREE's bin/gatehouse (A) and this tree's (B) with
 * the bench's proxy configuration, both pinned to the proxy core, and in
 * each round drives both with wrk at once (two wrk processes on the load
 * core). On a machine others are using, CPU per request moves by tens of
 * percent from one run to the next; two servers measured over the same
 * seconds see the same load, so their ratio B/A holds where separate runs
 * do not. Prints each round's CPU per request and the median of B/A.
 *
 * BENCH_AB_PATH (default /small, or /64k), BENCH_ROUNDS (7), BENCH_SECONDS (5).
 */
import path from 'node:path';
import { wrkRun } from './cases.ts';
import { cpuMicros } from './proc.ts';
import { startOrigin, startProxy, startWsOrigin } from './servers.ts';

const other = process.argv[2];
if (!other) {
  console.error('usage: node bench/ab.ts OTHER_TREE   (a checkout of another commit, with node_modules)');
  process.exit(2);
}
const rounds = Number(process.env.BENCH_ROUNDS ?? 7);
const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const urlPath = process.env.BENCH_AB_PATH ?? '/small';

const origin = await startOrigin();
const ws = await startWsOrigin();
const a = await startProxy('gatehouse', origin.port, ws.port, path.resolve(other, 'bin/gatehouse'));
const b = await startProxy('gatehouse', origin.port, ws.port);
const both = [a, b];
await Promise.all(both.map((s) => wrkRun(s.port, urlPath, seconds, 50)));

const median = (v: number[]) => [...v].sort((x, y) => x - y)[v.length >> 1];
const ratios: number[] = [];
console.log(`A: ${other}, B: this tree; ${urlPath}, ${rounds} rounds of ${seconds} s, both at once`);
for (let i = 0; i < rounds; i++) {
  const before = both.map((s) => cpuMicros(s.pid));
  const runs = await Promise.all(both.map((s) => wrkRun(s.port, urlPath, seconds, 50)));
  const [ca, cb] = both.map((s, k) => (cpuMicros(s.pid) - before[k]) / runs[k].requests);
  ratios.push(cb / ca);
  const errors = runs[0].errors + runs[1].errors;
  console.log(`  round ${i + 1}: A ${ca.toFixed(1)} µs  B ${cb.toFixed(1)} µs  B/A ${(cb / ca).toFixed(3)}${errors ? `  (${errors} errors)` : ''}`);
}
console.log(`B/A median ${median(ratios).toFixed(3)} (rounds ${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)})`);
for (const s of [...both, origin]) await s.stop();
await ws.stop();
process.exit(0);
