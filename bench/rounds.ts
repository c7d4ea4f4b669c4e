/**
 * Rounds of a case: each round measures nginx, then Gatehouse, so both see
 * the same machine; a figure is recorded with every round's value
 * (summary.ts prints same-round medians and the median ratio).
 */
import type { BenchServer } from './servers.ts';
import { addRow, type Bar } from './summary.ts';

export type Kind = 'nginx' | 'gatehouse';
export type Figures = Record<string, number>;

export const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

/**
 * Runs `measure` for nginx then Gatehouse, `count` times (`warm` once per
 * server first, if given), and returns each round's figures.
 */
export async function rounds<S extends BenchServer>(servers: Record<Kind, S>, measure: (s: S) => Promise<Figures>, warm?: (s: S) => Promise<unknown>, count = ROUNDS): Promise<Record<Kind, Figures[]>> {
  if (warm) for (const k of ['nginx', 'gatehouse'] as const) await warm(servers[k]);
  const out: Record<Kind, Figures[]> = { nginx: [], gatehouse: [] };
  for (let i = 0; i < count; i++) {
    for (const k of ['nginx', 'gatehouse'] as const) out[k].push(await measure(servers[k]));
  }
  return out;
}

/** Prints and records one figure of a case: same-round medians and the median ratio. */
export function report(caseName: string, label: string, unit: string, r: Record<Kind, Figures[]>, key: string, bar?: Bar): void {
  addRow({ caseName, label, unit, nginx: r.nginx.map((f) => f[key]), gatehouse: r.gatehouse.map((f) => f[key]), bar });
}
