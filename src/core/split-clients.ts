/**
 * The `split_clients string $variable { 10% a; 5.5% b; * c; }` block,
 * shared by ngx_http_split_clients_module and
 * ngx_stream_split_clients_module — the string (with variables) is hashed
 * with nginx's MurmurHash2 and the 32-bit hash space is cut into the parts
 * in order, so a client lands in the same part as under nginx. A hash
 * beyond the listed percentages gives an empty value; `*` takes the rest,
 * and a part that brings the total to exactly 100% takes the rest too (as
 * nginx does since 1.23.3).
 */
import type { ConfContext } from '../conf/context.ts';
import type { ConfNode } from '../conf/parser.ts';
import { compileComplex } from './variables.ts';
import type { ComplexValue, VariableHost, VariableRegistry } from './variables.ts';
interface Part {
  /** Upper bound of the part's hashes (exclusive); 0 for "everything left". */
  bound: number;
  value: string;
}

/** nginx's ngx_murmur_hash2 over the bytes of a byte string. */
export function murmurHash2(s: string): number {
  const m = 0x5bd1e995;
  let len = s.length;
  let h = len >>> 0;
  let i = 0;
  while (len >= 4) {
    let k = (s.charCodeAt(i) & 0xff) | ((s.charCodeAt(i + 1) & 0xff) << 8) | ((s.charCodeAt(i + 2) & 0xff) << 16) | ((s.charCodeAt(i + 3) & 0xff) << 24);
    k = Math.imul(k, m);
    k ^= k >>> 24;
    k = Math.imul(k, m);
    h = Math.imul(h, m) ^ k;
    i += 4;
    len -= 4;
  }
  // the tail bytes (nginx's switch falling through from 3 to 1)
  if (len >= 3) h ^= (s.charCodeAt(i + 2) & 0xff) << 16;
  if (len >= 2) h ^= (s.charCodeAt(i + 1) & 0xff) << 8;
  if (len >= 1) {
    h ^= s.charCodeAt(i) & 0xff;
    h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h >>> 0;
}

/** ngx_atofp(text, len, 2): a decimal with at most two fractional digits, times 100; NaN when invalid. */
function percentTimes100(text: string): number {
  if (text.length === 0) return NaN;
  let value = 0;
  let point = 2;
  let dot = false;
  for (const ch of text) {
    if (point === 0) return NaN;
    if (ch === '.') {
      if (dot) return NaN;
      dot = true;
      continue;
    }
    if (ch < '0' || ch > '9') return NaN;
    value = value * 10 + (ch.charCodeAt(0) - 0x30);
    if (value > Number.MAX_SAFE_INTEGER / 1000) return NaN;
    if (dot) point--;
  }
  return value * 10 ** point;
}

function pick<R extends VariableHost>(r: R, source: ComplexValue<R>, parts: Part[]): string {
  const hash = murmurHash2(source.evaluate(r));
  for (const p of parts) if (p.bound === 0 || hash < p.bound) return p.value;
  return '';
}

/** Reads a split_clients block into a variable of `vars` (the http or the stream block's). */
export function readSplitClients<R extends VariableHost>(cf: ConfContext, node: ConfNode, vars: VariableRegistry<R>): void {
  const source = compileComplex(cf, vars, node.args[0]);
  const target = node.args[1];
  if (!target.startsWith('$')) throw cf.error(`invalid variable name "${target}"`);
  const name = target.slice(1);
  const existing = vars.lookup(name);
  if (existing && !existing.prefix && !existing.changeable && !existing.set) throw cf.error(`the duplicate "${name}" variable`);

  // percentages ×100 (0 for `*`) as written
  const written: Array<{ percent: number; value: string }> = [];
  const saved = cf.node;
  try {
    for (const entry of node.children ?? []) {
      cf.node = entry;
      if (entry.children) throw cf.error('unexpected "{"');
      let percent = 0;
      if (entry.name !== '*') {
        const n = entry.name.endsWith('%') ? percentTimes100(entry.name.slice(0, -1)) : NaN;
        if (!(n > 0)) throw cf.error(`invalid percent value "${entry.name}"`);
        percent = n;
      }
      written.push({ percent, value: entry.args[0] ?? '' });
    }
  } finally {
    cf.node = saved;
  }

  // nginx checks the total once the block is read (reported at its `}`)
  cf.bodyRead = true;
  const parts: Part[] = [];
  let sum = 0;
  let last = 0;
  for (const w of written) {
    sum = w.percent ? sum + w.percent : 10000;
    if (sum > 10000) throw cf.error('percent total is greater than 100%');
    if (w.percent && sum !== 10000) {
      last += Math.floor((w.percent * 0xffffffff) / 10000);
      parts.push({ bound: last, value: w.value });
    } else {
      parts.push({ bound: 0, value: w.value });
    }
  }
  vars.define({ name, get: (r) => pick(r, source, parts), changeable: true });
}
