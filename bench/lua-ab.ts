/**
 * The Lua cases of two Gatehouse builds at the same time (as bench/ab.ts does
 * for the proxy): `node bench/lua-ab.ts OTHER_TREE` runs OTHER_TREE's
 * bin/gatehouse (A) and this tree's (B) with bench/lua.ts's configuration,
 * both pinned to the proxy core. Each round drives both at once, location by
 * location (`return 200`, the content hook, the bare proxy, the access hook
 * in front of it), and prints each one's CPU per request, what each hook adds
 * over its bare location, and the medians over the rounds.
 *
 * BENCH_ROUNDS (7), BENCH_SECONDS (4 per location).
 */
import path from 'node:path';
import { wrkRun } from './cases.ts';
import { startLuaProxy } from './lua.ts';
import { cpuMicros } from './proc.ts';
import { startOrigin } from './servers.ts';

const other = process.argv[2];
if (!other) {
  console.error('usage: node bench/lua-ab.ts OTHER_TREE   (a checkout of another commit, with node_modules)');
  process.exit(2);
}
const rounds = Number(process.env.BENCH_ROUNDS ?? 7);
const seconds = Number(process.env.BENCH_SECONDS ?? 4);
const PATHS = ['plain', 'lua', 'proxy', 'access'];

const origin = await startOrigin();
const both = [await startLuaProxy('gatehouse', origin.port, path.resolve(other, 'bin/gatehouse')), await startLuaProxy('gatehouse', origin.port)];
for (const p of PATHS) await Promise.all(both.map((s) => wrkRun(s.port, `/${p}`, seconds, 50)));

const median = (v: number[]) => [...v].sort((x, y) => x - y)[v.length >> 1];
type Row = Record<string, number>;
const rows: Row[][] = [[], []];
console.log(`A: ${other}, B: this tree; ${rounds} rounds of ${seconds} s per location, both at once (µs per request)`);
const fmt = (f: Row) => `plain ${f.plain.toFixed(2)} lua ${f.lua.toFixed(2)} (+${f.contentAdds.toFixed(2)})  proxy ${f.proxy.toFixed(2)} access ${f.access.toFixed(2)} (+${f.accessAdds.toFixed(2)})`;
for (let i = 0; i < rounds; i++) {
  const f: Row[] = [{}, {}];
  for (const p of PATHS) {
    const before = both.map((s) => cpuMicros(s.pid));
    const runs = await Promise.all(both.map((s) => wrkRun(s.port, `/${p}`, seconds, 50)));
    both.forEach((s, k) => { f[k][p] = (cpuMicros(s.pid) - before[k]) / runs[k].requests; });
    if (runs[0].errors + runs[1].errors) console.log(`  /${p}: ${runs[0].errors} + ${runs[1].errors} errors`);
  }
  for (const x of f) { x.contentAdds = x.lua - x.plain; x.accessAdds = x.access - x.proxy; }
  rows[0].push(f[0]);
  rows[1].push(f[1]);
  console.log(`  round ${i + 1}: A ${fmt(f[0])}\n           B ${fmt(f[1])}`);
}
const med = (k: number, key: string) => median(rows[k].map((r) => r[key]));
const ratio = (key: string) => median(rows[0].map((a, i) => rows[1][i][key] / a[key]));
for (const key of ['plain', 'lua', 'contentAdds', 'proxy', 'access', 'accessAdds']) {
  console.log(`${key.padEnd(12)} A ${med(0, key).toFixed(2).padStart(6)}  B ${med(1, key).toFixed(2).padStart(6)}  B/A (median of rounds) ${ratio(key).toFixed(3)}`);
}
for (const s of [...both, origin]) await s.stop();
process.exit(0);
