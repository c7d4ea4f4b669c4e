/**
 * The bench's figures: each row holds every round's figure for both servers;
 * it is printed as same-round medians (each server's median, and the median
 * of the rounds' Gatehouse/nginx ratios), and the run ends with a summary
 * table in the shape of issue #9's (case, nginx, gatehouse, ratio, bar).
 */

/** A bar from the issue: a ratio to nginx, or a limit on Gatehouse's own figure. */
export interface Bar {
  ratioAtMost?: number;
  ratioAtLeast?: number;
  gatehouseBelow?: number;
}

export interface Row {
  caseName: string;
  label: string;
  unit: string;
  /** One figure per round. */
  nginx: number[];
  gatehouse: number[];
  bar?: Bar;
}

export const rows: Row[] = [];

export function median(xs: number[]): number {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/** The median of the rounds' ratios (each round measures both servers on the same machine state). */
export function medianRatio(r: Row): number {
  return median(r.nginx.map((n, i) => (n > 0 ? r.gatehouse[i] / n : NaN)));
}

function fmt(n: number): string {
  if (!Number.isFinite(n)) return '—';
  return n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2);
}

function barText(b: Bar | undefined): string {
  if (!b) return '';
  if (b.ratioAtMost !== undefined) return `≤ ${b.ratioAtMost.toFixed(1)}×`;
  if (b.ratioAtLeast !== undefined) return `≥ ${b.ratioAtLeast.toFixed(1)}×`;
  return `< ${b.gatehouseBelow}`;
}

/** Whether a row meets its bar; undefined when it has none. */
export function meetsBar(r: Row): boolean | undefined {
  const b = r.bar;
  if (!b) return undefined;
  const ratio = medianRatio(r);
  if (b.ratioAtMost !== undefined) return ratio <= b.ratioAtMost;
  if (b.ratioAtLeast !== undefined) return ratio >= b.ratioAtLeast;
  return median(r.gatehouse) < b.gatehouseBelow!;
}

export function addRow(r: Row): void {
  rows.push(r);
  const spread = (xs: number[]) => (xs.length > 1 ? ` [${xs.map(fmt).join(' ')}]` : '');
  console.log(`  ${r.label.padEnd(28)} nginx ${fmt(median(r.nginx)).padStart(8)}${spread(r.nginx)}  gatehouse ${fmt(median(r.gatehouse)).padStart(8)}${spread(r.gatehouse)} ${r.unit}  ratio ${fmt(medianRatio(r))}×`);
}

/** The table at the end: rows with a bar first (the table), then the rest. */
export function printSummary(note: string): void {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  const cells = (r: Row) => {
    const ok = meetsBar(r);
    const bar = r.bar ? `${barText(r.bar)} ${ok ? 'met' : 'NOT met'}` : '';
    return [`${r.caseName}: ${r.label} (${r.unit})`, fmt(median(r.nginx)), fmt(median(r.gatehouse)), `${fmt(medianRatio(r))}×`, bar];
  };
  console.log(`\nSummary (${note})\n`);
  console.log(line(['case', 'nginx', 'gatehouse', 'ratio', 'bar']));
  console.log(line(['---', '---:', '---:', '---:', '---']));
  for (const r of rows.filter((x) => x.bar)) console.log(line(cells(r)));
  for (const r of rows.filter((x) => !x.bar && /CPU/.test(x.label))) console.log(line(cells(r)));
}
