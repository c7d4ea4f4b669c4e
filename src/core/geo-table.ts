/**
 * The table behind `geo` blocks, shared by ngx_http_geo_module and
 * ngx_stream_geo_module (nginx has two copies of the same code): networks
 * (`192.0.2.0/24`, `::1/128`) go into radix trees, one per address family,
 * with nginx's longest-prefix lookup; with `ranges` the entries are IPv4
 * ranges (`a.b.c.d-e.f.g.h`) kept per /16 as nginx keeps them, so adding,
 * splitting, deleting and "overlaps" errors behave as nginx's do. An
 * address that cannot be read (a unix socket, a variable that is not an
 * address) looks up 255.255.255.255 in network mode and takes the default
 * in range mode. Entries only one subsystem knows (http's `proxy`) are
 * handed to the module's hook.
 *
 * nginx's binary range bases (`include` of a file with a fresh `.bin` next
 * to it, written for huge range files) are not made or read: the text is
 * always read, which gives the same values.
 */
import type { ConfContext } from '../conf/context.ts';
import type { ConfNode } from '../conf/parser.ts';
import { inetAddr, isV4Mapped, parseCidr } from './inet.ts';
import type { Cidr } from './inet.ts';
import type { VariableHost, VariableRegistry } from './variables.ts';

/** A radix tree node: the value of the network ending here, if any. */
interface RadixNode {
  left: RadixNode | undefined;
  right: RadixNode | undefined;
  parent: RadixNode | undefined;
  value: string | undefined;
}

function radixNode(parent: RadixNode | undefined): RadixNode {
  return { left: undefined, right: undefined, parent, value: undefined };
}

/** The bit `i` (from the most significant) of `key`. */
function bitAt(key: Uint8Array, i: number): boolean {
  return (key[i >> 3] & (0x80 >> (i & 7))) !== 0;
}

/** Prefix length of a contiguous mask. */
function maskBits(mask: Uint8Array): number {
  let bits = 0;
  for (const b of mask) for (let m = 0x80; m && b & m; m >>= 1) bits++;
  return bits;
}

/** nginx's radix tree (ngx_radix_tree.c), with its first six levels made up front as nginx does. */
class RadixTree {
  readonly root = radixNode(undefined);

  constructor() {
    // ngx_radix_tree_create(pool, -1) preallocates six levels; it matters to `delete`
    const grow = (n: RadixNode, depth: number): void => {
      if (depth === 6) return;
      n.left = radixNode(n);
      n.right = radixNode(n);
      grow(n.left, depth + 1);
      grow(n.right, depth + 1);
    };
    grow(this.root, 0);
  }

  /** Returns false where a value is already there (nginx's NGX_BUSY). */
  insert(key: Uint8Array, bits: number, value: string): boolean {
    let node = this.root;
    let i = 0;
    for (; i < bits; i++) {
      const next = bitAt(key, i) ? node.right : node.left;
      if (!next) break;
      node = next;
    }
    if (i === bits) {
      if (node.value !== undefined) return false;
      node.value = value;
      return true;
    }
    for (; i < bits; i++) {
      const next = radixNode(node);
      if (bitAt(key, i)) node.right = next;
      else node.left = next;
      node = next;
    }
    node.value = value;
    return true;
  }

  /** Returns false where there is nothing to delete. */
  delete(key: Uint8Array, bits: number): boolean {
    let node: RadixNode | undefined = this.root;
    for (let i = 0; node && i < bits; i++) node = bitAt(key, i) ? node.right : node.left;
    if (!node) return false;
    if (node.left || node.right || !node.parent) {
      if (node.value === undefined) return false;
      node.value = undefined;
      return true;
    }
    // a leaf: unlink it and every parent left empty
    for (;;) {
      const parent: RadixNode = node.parent!;
      if (parent.right === node) parent.right = undefined;
      else parent.left = undefined;
      node = parent;
      if (node.left || node.right || node.value !== undefined || !node.parent) break;
    }
    return true;
  }

  /** The value of the longest network holding `key`. */
  find(key: Uint8Array): string | undefined {
    let value: string | undefined;
    let node: RadixNode | undefined = this.root;
    for (let i = 0; node; i++) {
      if (node.value !== undefined) value = node.value;
      if (i === key.length * 8) break;
      node = bitAt(key, i) ? node.right : node.left;
    }
    return value;
  }
}
/** One range inside a /16 (nginx's ngx_http_geo_range_t). */
interface GeoRange {
  start: number;
  end: number;
  value: string;
}

/** 255.255.255.255: what nginx looks up for an address it could not read (INADDR_NONE). */
const NONE_V4 = Uint8Array.of(255, 255, 255, 255);

export interface GeoTable {
  ranges: boolean;
  tree: RadixTree;
  tree6: RadixTree;
  /** Range mode: the ranges of each /16, by its high 16 bits. */
  low: Map<number, GeoRange[]>;
  defaultValue: string | undefined;
}

/** The value for address `a` (undefined: not an address), as ngx_*_geo_cidr_variable / _range_variable. */
export function geoValue(geo: GeoTable, a: Uint8Array | undefined): string {
  return geo.ranges ? rangeValue(geo, a) : cidrValue(geo, a);
}

function cidrValue(geo: GeoTable, a: Uint8Array | undefined): string {
  let v: string | undefined;
  if (!a) v = geo.tree.find(NONE_V4);
  else if (a.length === 4) v = geo.tree.find(a);
  else if (isV4Mapped(a)) v = geo.tree.find(a.subarray(12));
  else v = geo.tree6.find(a);
  return v ?? '';
}

/** IPv4 only; anything else is 255.255.255.255. */
function rangeValue(geo: GeoTable, a: Uint8Array | undefined): string {
  let n = 0xffffffff;
  if (a && a.length === 4) n = ((a[0] << 24) | (a[1] << 16) | (a[2] << 8) | a[3]) >>> 0;
  else if (a && isV4Mapped(a)) n = ((a[12] << 24) | (a[13] << 16) | (a[14] << 8) | a[15]) >>> 0;
  const list = geo.low.get(n >>> 16);
  if (list) {
    const low = n & 0xffff;
    for (const range of list) if (low >= range.start && low <= range.end) return range.value;
  }
  return geo.defaultValue ?? '';
}

/** `a.b.c.d` of a range bucket `h` and a low part `x`. */
function rangeText(h: number, x: number): string {
  return `${h >> 8}.${h & 0xff}.${x >> 8}.${x & 0xff}`;
}

/**
 * An entry of a geo block that one subsystem reads itself (http's `proxy`
 * and `proxy_recursive`): returns true when it took the entry.
 */
export type GeoEntryHook = (value: string[], reader: GeoReader) => boolean;

/** Reads one geo block (ngx_http_geo_block + ngx_http_geo). */
export class GeoReader {
  readonly geo: GeoTable;
  volatile = false;
  private cidrStarted = false;
  private readonly cf: ConfContext;
  private readonly hook: GeoEntryHook | undefined;

  constructor(cf: ConfContext, hook: GeoEntryHook | undefined) {
    this.cf = cf;
    this.hook = hook;
    this.geo = { ranges: false, tree: new RadixTree(), tree6: new RadixTree(), low: new Map(), defaultValue: undefined };
  }

  entry(node: ConfNode): void {
    const { cf, geo } = this;
    if (node.children) throw cf.error('unexpected "{"');
    const value = [node.name, ...node.args];
    if (value.length === 1) {
      if (node.name === 'ranges') {
        if (this.cidrStarted) throw cf.error('the "ranges" directive must be the first directive inside "geo" block');
        geo.ranges = true;
        return;
      }
      if (this.hook?.(value, this)) return;
      if (node.name === 'volatile') { this.volatile = true; return; }
    }
    if (value.length !== 2) throw cf.error('invalid number of the geo parameters');
    if (this.hook?.(value, this)) return;
    if (geo.ranges) this.range(value);
    else this.cidr(value);
  }

  /** ngx_http_geo_cidr_value: a network, with 255.255.255.255 allowed as itself. */
  network(text: string): Cidr {
    if (text === '255.255.255.255') {
      return { deny: false, family: 4, addr: NONE_V4.slice(), mask: NONE_V4.slice(), hostBits: false };
    }
    const cidr = parseCidr(text);
    if (!cidr) throw this.cf.error(`invalid network "${text}"`);
    if (cidr.hostBits) this.cf.warn(`low address bits of ${text} are meaningless`);
    return cidr;
  }

  private cidr(value: string[]): void {
    this.cidrStarted = true;
    const [first, second] = value;
    if (first === 'default') {
      this.cidrAdd(this.geo.tree, new Uint8Array(4), 0, second, first);
      this.cidrAdd(this.geo.tree6, new Uint8Array(16), 0, second, first);
      return;
    }
    const del = first === 'delete';
    const net = del ? second : first;
    const cidr = this.network(net);
    const tree = cidr.family === 4 ? this.geo.tree : this.geo.tree6;
    const bits = maskBits(cidr.mask);
    if (del) {
      if (!tree.delete(cidr.addr, bits)) this.cf.warn(`no network "${net}" to delete`);
      return;
    }
    this.cidrAdd(tree, cidr.addr, bits, second, net);
  }

  private cidrAdd(tree: RadixTree, addr: Uint8Array, bits: number, value: string, net: string): void {
    if (tree.insert(addr, bits, value)) return;
    const old = tree.find(addr);
    this.cf.warn(`duplicate network "${net}", value: "${value}", old value: "${old}"`);
    tree.delete(addr, bits);
    tree.insert(addr, bits, value);
  }

  private range(value: string[]): void {
    const { cf, geo } = this;
    const [first, second] = value;
    if (first === 'default') {
      if (geo.defaultValue !== undefined) cf.warn(`duplicate default geo range value: "${second}", old value: "${geo.defaultValue}"`);
      geo.defaultValue = second;
      return;
    }
    const del = first === 'delete';
    const net = del ? second : first;
    const dash = net.indexOf('-');
    const start = dash < 0 ? undefined : inetAddr(net.slice(0, dash));
    const end = dash < 0 || !start ? undefined : inetAddr(net.slice(dash + 1));
    const toNum = (a: Uint8Array) => ((a[0] << 24) | (a[1] << 16) | (a[2] << 8) | a[3]) >>> 0;
    if (!start || !end || toNum(start) > toNum(end)) throw cf.error(`invalid range "${net}"`);
    if (del) {
      if (this.deleteRange(toNum(start), toNum(end))) cf.warn(`no address range "${net}" to delete`);
      return;
    }
    this.addRange(toNum(start), toNum(end), second, net);
  }

  /** ngx_http_geo_add_range: per /16, keeps each list ordered and without overlaps. */
  private addRange(start: number, end: number, value: string, net: string): void {
    for (let n = start; n <= end; n = ((n >>> 16) + 1) * 0x10000) {
      const h = n >>> 16;
      const s = n === start ? n & 0xffff : 0;
      const e = (n | 0xffff) >>> 0 > end ? end & 0xffff : 0xffff;
      let list = this.geo.low.get(h);
      if (!list) this.geo.low.set(h, list = []);
      let placed = false;
      for (let i = list.length - 1; i >= 0; i--) {
        const cur = list[i];
        if (e < cur.start) continue;
        if (s > cur.end) {
          list.splice(i + 1, 0, { start: s, end: e, value });
        } else if (s === cur.start && e === cur.end) {
          this.cf.warn(`duplicate range "${net}", value: "${value}", old value: "${cur.value}"`);
          cur.value = value;
        } else if (s > cur.start && e < cur.end) {
          // split the range around the new one
          list.splice(i + 1, 0, { start: s, end: e, value }, { start: e + 1, end: cur.end, value: cur.value });
          cur.end = s - 1;
        } else if (s === cur.start && e < cur.end) {
          list.splice(i, 0, { start: s, end: e, value });
          cur.start = e + 1;
        } else if (s > cur.start && e === cur.end) {
          list.splice(i + 1, 0, { start: s, end: e, value });
          cur.end = s - 1;
        } else {
          throw this.cf.error(`range "${net}" overlaps "${rangeText(h, cur.start)}-${rangeText(h, cur.end)}"`);
        }
        placed = true;
        break;
      }
      if (!placed) list.unshift({ start: s, end: e, value });
      if (h === 0xffff) break;
    }
  }

  /** ngx_http_geo_delete_range: removes exactly matching ranges; true when one was missing. */
  private deleteRange(start: number, end: number): boolean {
    let warn = false;
    for (let n = start; n <= end; n = ((n >>> 16) + 1) * 0x10000) {
      const h = n >>> 16;
      const s = n === start ? n & 0xffff : 0;
      const e = (n | 0xffff) >>> 0 > end ? end & 0xffff : 0xffff;
      const list = this.geo.low.get(h);
      if (!list || list.length === 0) {
        warn = true;
      } else {
        for (let i = 0; i < list.length; i++) {
          if (list[i].start === s && list[i].end === e) {
            list.splice(i, 1);
            break;
          }
          if (i === list.length - 1) warn = true;
        }
      }
      if (h === 0xffff) break;
    }
    return warn;
  }
}

/** What a geo block defines: the variable's name, the source variable's index (-1: the client's address), the table. */
export interface GeoBlock {
  name: string;
  sourceIndex: number;
  geo: GeoTable;
  volatile: boolean;
}

/** Reads `geo [$address] $variable { ... }` with the block's variables `vars`; the caller defines the variable. */
export function readGeoBlock<R extends VariableHost>(cf: ConfContext, node: ConfNode, vars: VariableRegistry<R>, hook?: GeoEntryHook): GeoBlock {
  const names = node.args.map((a) => {
    if (!a.startsWith('$')) throw cf.error(`invalid variable name "${a}"`);
    return a.slice(1);
  });
  const sourceIndex = names.length === 2 ? vars.index(names[0]) : -1;
  const name = names[names.length - 1];
  const existing = vars.lookup(name);
  if (existing && !existing.prefix && !existing.changeable && !existing.set) throw cf.error(`the duplicate "${name}" variable`);

  const reader = new GeoReader(cf, hook);
  const saved = cf.node;
  try {
    for (const entry of node.children ?? []) {
      cf.node = entry;
      reader.entry(entry);
    }
  } finally {
    cf.node = saved;
  }
  const geo = reader.geo;
  for (const [h, list] of geo.low) if (list.length === 0) geo.low.delete(h);
  if (!geo.ranges) {
    // no `default`: the empty value everywhere
    geo.tree.insert(new Uint8Array(4), 0, '');
    geo.tree6.insert(new Uint8Array(16), 0, '');
  }
  return { name, sourceIndex, geo, volatile: reader.volatile };
}
