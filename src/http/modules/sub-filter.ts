/**
 * ngx_http_sub_filter_module: `sub_filter string replacement` (several; both
 * may hold variables), `sub_filter_types`, `sub_filter_once`,
 * `sub_filter_last_modified`. Matching is ASCII case-insensitive and byte
 * wise, as nginx's: at each position the first configured string that
 * matches there wins, matches do not overlap, and with `sub_filter_once` each
 * string is replaced once. The body streams: only the tail of a buffer that
 * may begin a match (shorter than the longest string) waits for the next.
 */
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import { HTTP_ANY } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { flagArg } from '../../conf/values.ts';
import { EMPTY_CHUNK, joinBodyFilter, nextBodyFilter } from '../body-filter.ts';
import type { BodyFilterEntry } from '../body-filter.ts';
import { setting } from '../../conf/setters.ts';
import { httpMainOf } from '../http-conf.ts';
import type { HttpModule } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { clearForChangedBody, typeMatches, typesDirective } from './gzip.ts';

interface SubPair {
  /** The search string, lowercased. */
  match: ComplexValue;
  replacement: ComplexValue;
}

interface SubConf {
  pairs?: SubPair[];
  types?: Set<string>;
  once?: boolean;
  lastModified?: boolean;
}

const SUB_DEFAULTS = { types: new Set(['text/html']), once: true, lastModified: false } satisfies SubConf;
const subSlot = defineSlot<SubConf, typeof SUB_DEFAULTS>('sub_filter', () => ({}), inheritUnset, SUB_DEFAULTS);

const LOWER = new Uint8Array(256).map((_, c) => (c >= 0x41 && c <= 0x5a ? c | 0x20 : c));

const NONE = 0;
const FULL = 1;
const PARTIAL = 2;

/** The search strings of a location (or of one request, when they hold variables), with a skip table. */
class Matcher {
  readonly patterns: Buffer[];
  readonly replacements: ComplexValue[];
  readonly minLen: number;
  /** How far the window may move when its last byte is this (lowercased) byte. */
  private readonly shift: Uint16Array;
  /** Strings whose byte at minLen - 1 is this byte, in configured order. */
  private readonly candidates: number[][];

  constructor(patterns: Buffer[], replacements: ComplexValue[]) {
    this.patterns = patterns;
    this.replacements = replacements;
    this.minLen = Math.min(...patterns.map((p) => p.length));
    this.shift = new Uint16Array(256).fill(this.minLen);
    this.candidates = Array.from({ length: 256 }, () => []);
    patterns.forEach((pat, i) => {
      for (let j = 0; j < this.minLen; j++) {
        const c = pat[this.minLen - 1 - j];
        if (j < this.shift[c]) this.shift[c] = j;
      }
      this.candidates[pat[this.minLen - 1]].push(i);
    });
  }

  /** Whether pattern `i` is at `start` of `data` (PARTIAL: all of `data` from there matches its beginning). */
  private test(data: Buffer, start: number, i: number): number {
    const pat = this.patterns[i];
    const n = Math.min(pat.length, data.length - start);
    for (let k = 0; k < n; k++) if (LOWER[data[start + k]] !== pat[k]) return NONE;
    return n === pat.length ? FULL : PARTIAL;
  }

  /**
   * Scans `data` for matches, calling `found(start, i)` for each; returns
   * where a possible match begins that needs more data (data.length if none).
   * `skip(i)` excludes strings already used up (sub_filter_once).
   */
  scan(data: Buffer, found: (start: number, i: number) => boolean, skip: (i: number) => boolean): number {
    const min = this.minLen;
    const len = data.length;
    let offset = min - 1;
    let from = 0;
    outer: while (offset < len) {
      const c = LOWER[data[offset]];
      const s = this.shift[c];
      if (s > 0) { offset += s; continue; }
      const start = offset - min + 1;
      for (const i of this.candidates[c]) {
        if (skip(i)) continue;
        const rc = this.test(data, start, i);
        if (rc === NONE) continue;
        if (rc === PARTIAL) return start;
        if (!found(start, i)) return len;
        from = start + this.patterns[i].length;
        offset = from + min - 1;
        continue outer;
      }
      offset++;
    }
    // starts too close to the end for the shortest string: only a beginning of one can be there
    for (let start = Math.max(from, len - min + 1); start < len; start++) {
      for (let i = 0; i < this.patterns.length; i++) {
        if (!skip(i) && this.test(data, start, i) === PARTIAL) return start;
      }
    }
    return len;
  }
}

/** Matchers of locations whose strings have no variables, built once. */
const staticMatchers = new WeakMap<SubPair[], Matcher>();

function matcherFor(r: HttpRequest, pairs: SubPair[]): Matcher | undefined {
  if (pairs.every((p) => p.match.constant !== undefined)) {
    let m = staticMatchers.get(pairs);
    if (!m) {
      m = new Matcher(pairs.map((p) => Buffer.from(p.match.constant!, 'latin1')), pairs.map((p) => p.replacement));
      staticMatchers.set(pairs, m);
    }
    return m;
  }
  // strings with variables: evaluated per request, lowercased; empty ones are left out
  const patterns: Buffer[] = [];
  const replacements: ComplexValue[] = [];
  for (const p of pairs) {
    const s = p.match.evaluate(r);
    if (s === '') continue;
    patterns.push(Buffer.from(s.toLowerCase(), 'latin1'));
    replacements.push(p.replacement);
  }
  return patterns.length ? new Matcher(patterns, replacements) : undefined;
}

/** The body filter of one response. */
class SubFilter {
  private readonly r: HttpRequest;
  private readonly self: BodyFilterEntry;
  private readonly m: Matcher;
  private readonly replaceOnce: boolean;
  /** The evaluated replacement of each string, once used (nginx evaluates it once per response). */
  private readonly values: Array<Buffer | undefined>;
  private applied = 0;
  /** Every string was replaced once (sub_filter_once): the rest passes untouched. */
  private exhausted = false;
  /** The end of the last buffer, which may begin a match. */
  private held: Buffer | undefined;

  constructor(r: HttpRequest, self: BodyFilterEntry, m: Matcher, once: boolean) {
    this.r = r;
    this.self = self;
    this.m = m;
    this.replaceOnce = once;
    this.values = new Array(m.patterns.length);
  }

  write(chunk: Buffer, eof: boolean): boolean {
    let ok = true;
    if (chunk.length) {
      const out = this.exhausted && !this.held ? chunk : this.filter(chunk);
      if (out.length) ok = nextBodyFilter(this.r, this.self, out, false);
    }
    if (!eof) return ok;
    // what was held for a match that never came goes out as it is
    if (this.held) nextBodyFilter(this.r, this.self, this.held, false);
    this.held = undefined;
    return nextBodyFilter(this.r, this.self, EMPTY_CHUNK, true);
  }

  private filter(chunk: Buffer): Buffer {
    const data = this.held ? Buffer.concat([this.held, chunk]) : chunk;
    this.held = undefined;
    if (this.exhausted) return data;
    const pieces: Buffer[] = [];
    let from = 0;
    const hold = this.m.scan(data, (start, i) => {
      if (start > from) pieces.push(data.subarray(from, start));
      let v = this.values[i];
      if (v === undefined) {
        v = Buffer.from(this.m.replacements[i].evaluate(this.r), 'latin1');
        this.values[i] = v;
      }
      if (v.length) pieces.push(v);
      from = start + this.m.patterns[i].length;
      if (this.replaceOnce && ++this.applied === this.m.patterns.length) {
        this.exhausted = true;
        return false;
      }
      return true;
    }, (i) => this.replaceOnce && this.values[i] !== undefined);
    const end = this.exhausted ? data.length : hold;
    if (end > from) pieces.push(data.subarray(from, end));
    // a copy: a few bytes must not keep the whole buffer alive
    if (end < data.length) this.held = Buffer.from(data.subarray(end));
    if (pieces.length === 1) return pieces[0];
    return Buffer.concat(pieces);
  }
}

const SUB_CTX = {};

function subHeaderFilter(r: HttpRequest, body: BodyFilterEntry): void {
  const conf = r.level.get(subSlot);
  if (!conf.pairs || r.contentLength === 0 || !typeMatches(r, conf.types)) return;
  const m = matcherFor(r, conf.pairs);
  if (!m) return;
  if (r.method !== 'HEAD') {
    r.ctx.set(SUB_CTX, new SubFilter(r, body, m, conf.once));
    joinBodyFilter(r, body);
  }
  if (r.parent) return;
  clearForChangedBody(r, conf.lastModified);
}

const directives: Directive[] = [
  {
    name: 'sub_filter', contexts: HTTP_ANY, args: 2,
    handler(cf, node) {
      const [search, replacement] = node.args;
      if (search === '') throw cf.error('empty search pattern');
      const c = cf.get(subSlot);
      c.pairs ??= [];
      if (c.pairs.length === 255) throw cf.error('number of search patterns exceeds 255');
      const vars = httpMainOf(cf).variables;
      // nginx lowers the whole argument first, variable names included
      const lowered = search.replace(/[A-Z]+/g, (s) => s.toLowerCase());
      c.pairs.push({ match: compileComplex(cf, vars, lowered), replacement: compileComplex(cf, vars, replacement) });
      return undefined;
    },
  },
  typesDirective('sub_filter_types', subSlot),
  { name: 'sub_filter_once', contexts: HTTP_ANY, args: 'flag', handler: setting(subSlot, 'once', flagArg) },
  { name: 'sub_filter_last_modified', contexts: HTTP_ANY, args: 'flag', handler: setting(subSlot, 'lastModified', flagArg) },
];

export const subFilterModule: HttpModule = {
  name: 'ngx_http_sub_filter_module',
  directives,
  postconfiguration(http) {
    // nginx's sub filter position (see http-conf.ts): before ssi (1300) and gzip (1500)
    const body = http.addBodyFilter(900, (r, chunk, eof) => (r.ctx.get(SUB_CTX) as SubFilter).write(chunk, eof));
    http.addHeaderFilter(900, (r) => subHeaderFilter(r, body), { subrequests: true });
  },
};
