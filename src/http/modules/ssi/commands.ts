/**
 * The SSI commands (include, echo, config, set, if/elif/else/endif,
 * block/endblock) and how their parameters are read: variables in values
 * (nginx's ngx_http_ssi_evaluate_string), `if` expressions with string and
 * regex comparisons, and echo's encodings — with nginx's error messages.
 */
import { Writable } from 'node:stream';
import { compileRegex } from '../../regex.ts';
import { coreLoc, CORE_LOC_DEFAULTS } from '../core/settings.ts';
import type { HttpRequest } from '../../request.ts';
import { requestLog } from '../../request-log.ts';
import type { RequestLogger } from '../../request-log.ts';
import { endBody, sendBody, sendHeader } from '../../response.ts';
import { createSubrequest, parseUnsafeUri } from '../../subrequest.ts';
import type { Subrequest } from '../../subrequest.ts';
import type { SsiBlock, SsiContext, SsiMainState } from './context.ts';
import { COND_ELSE, COND_IF, ENC_ENTITY, ENC_NONE, ENC_URL } from './context.ts';

export const SSI_OK = 0;
export const SSI_ERROR = 1;

/** What a command sees of the filter running it. */
export interface SsiRun {
  readonly r: HttpRequest;
  readonly ctx: SsiContext;
  readonly mctx: SsiMainState;
  readonly log: RequestLogger;
  /** Output text at the current place. */
  send(buf: Buffer): void;
  /** A place for a subrequest's body after what was emitted so far. */
  place(): Writable;
  /** Starts `sub` once the current buffer is parsed (nginx posts subrequests). */
  post(sub: Subrequest): void;
  /** Waits until `sub` is over; false when the client's request is gone. */
  wait(sub: Subrequest): Promise<boolean>;
}

type Params = Map<string, string>;

export interface SsiCommand {
  params: readonly string[];
  mandatory: readonly string[];
  /** Allowed only after `if` (COND_IF) or also after `else` (COND_ELSE). */
  conditional: number;
  /** Runs even while a block is being collected (endblock). */
  block: boolean;
  /** What was emitted goes out before it runs (include). */
  flush: boolean;
  run(f: SsiRun, p: Params): number | Promise<number>;
}

const ADD_PREFIX = 1;

/** SSI variables first (captures, set, include set=), then the request's (nginx's ngx_http_ssi_get_variable). */
export function ssiVariable(f: SsiRun, name: string): string | undefined {
  if (name.length === 1 && name >= '0' && name <= '9') {
    const i = name.charCodeAt(0) - 48;
    if (i < f.mctx.captures.length) return f.mctx.captures[i];
  }
  const v = f.mctx.variables.get(name);
  if (v !== undefined) return v;
  return requestVariable(f.r, name);
}

/**
 * A variable of the configuration by name: declared ones through the
 * request's cache, prefixed ones ($arg_x, $http_x) computed each time, as
 * nginx's ngx_http_get_variable does for names it has not indexed.
 */
function requestVariable(r: HttpRequest, name: string): string | undefined {
  const vars = r.main.variables;
  const def = vars.lookup(name);
  if (!def) return undefined;
  if (def.prefix) return def.get(r, name);
  return vars.valueByName(r, name);
}

function isNameChar(c: number): boolean {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x5f;
}

/** The directory part of the request's URI, for relative include paths. */
function uriPrefix(uri: string): string {
  return uri.slice(0, uri.lastIndexOf('/') + 1);
}

/**
 * A parameter value with its variables substituted and backslashes
 * removed before \ ' " $ (nginx's ngx_http_ssi_evaluate_string);
 * undefined after logging an error.
 */
export function evaluate(f: SsiRun, text: string, flags = 0): string | undefined {
  if (!text.includes('$')) {
    const prefix = flags & ADD_PREFIX && text[0] !== '/' ? uriPrefix(f.r.uri) : '';
    return prefix + unquote(text, 0, text.length).value;
  }
  const parts: string[] = [];
  let i = 0;
  while (i < text.length) {
    if (text[i] !== '$') {
      const lit = unquote(text, i, text.length, true);
      parts.push(lit.value);
      i = lit.end;
      continue;
    }
    if (++i === text.length) return invalidVariable(f, text);
    let bracket = false;
    if (text[i] === '{') {
      bracket = true;
      if (++i === text.length) return invalidVariable(f, text);
    }
    const start = i;
    let end = -1;
    for (; i < text.length; i++) {
      if (text[i] === '}' && bracket) {
        end = i++;
        bracket = false;
        break;
      }
      if (!isNameChar(text.charCodeAt(i))) break;
    }
    const name = text.slice(start, end < 0 ? i : end).toLowerCase();
    if (bracket) {
      f.log.error(`the closing bracket in "${name}" variable is missing`);
      return undefined;
    }
    if (name === '') return invalidVariable(f, text);
    const v = ssiVariable(f, name);
    if (v !== undefined) parts.push(v);
  }
  let prefix = '';
  if (flags & ADD_PREFIX) {
    const first = parts.find((p) => p !== '');
    if (first !== undefined && first[0] !== '/') prefix = uriPrefix(f.r.uri);
  }
  return prefix + parts.join('');
}

function invalidVariable(f: SsiRun, text: string): undefined {
  f.log.error(`invalid variable name in "${text}"`);
  return undefined;
}

/** Literal text up to an unescaped `$` (with `stopAtDollar`): `\x` is `x` for \ ' " $, else kept as `\x`. */
function unquote(text: string, from: number, to: number, stopAtDollar = false): { value: string; end: number } {
  let out = '';
  let quoted = false;
  let i = from;
  for (; i < to; i++) {
    const ch = text[i];
    if (!quoted) {
      if (ch === '\\') { quoted = true; continue; }
      if (ch === '$' && stopAtDollar) break;
    } else {
      quoted = false;
      if (ch !== '\\' && ch !== '\'' && ch !== '"' && ch !== '$') out += '\\';
    }
    out += ch;
  }
  return { value: out, end: i };
}

/** Characters ngx_escape_uri's NGX_ESCAPE_HTML table escapes (besides controls, space and 8-bit bytes). */
const URL_HTML_UNSAFE = new Set(['"', '#', '%', '\'', '<', '>', '\\', '^', '`', '{', '|', '}', '\x7f']);

function escapeUrl(s: string): string {
  let out = '';
  for (const ch of s) {
    const c = ch.charCodeAt(0);
    out += c <= 0x20 || c >= 0x80 || URL_HTML_UNSAFE.has(ch) ? `%${c.toString(16).toUpperCase().padStart(2, '0')}` : ch;
  }
  return out;
}

function escapeEntity(s: string): string {
  return s.replace(/[<>&"]/g, (c) => (c === '<' ? '&lt;' : c === '>' ? '&gt;' : c === '&' ? '&amp;' : '&quot;'));
}

function include(f: SsiRun, p: Params): number | Promise<number> {
  let uri = p.get('virtual');
  const file = p.get('file');
  let wait = p.get('wait');
  const set = p.get('set');
  const stub = p.get('stub');
  if (uri !== undefined && file !== undefined) {
    f.log.error(`inclusion may be either virtual="${uri}" or file="${file}"`);
    return SSI_ERROR;
  }
  if (uri === undefined && file === undefined) {
    f.log.error('no parameter in "include" SSI command');
    return SSI_ERROR;
  }
  if (set !== undefined && stub !== undefined) {
    f.log.error('"set" and "stub" cannot be used together in "include" SSI command');
    return SSI_ERROR;
  }
  if (wait !== undefined) {
    if (uri === undefined) {
      f.log.error(`"wait" cannot be used with file="${file}"`);
      return SSI_ERROR;
    }
    if (wait.toLowerCase() === 'no') wait = undefined;
    else if (wait.toLowerCase() !== 'yes') {
      f.log.error(`invalid value "${wait}" in the "wait" parameter`);
      return SSI_ERROR;
    }
  }
  // file= is a virtual include that is always waited for
  if (uri === undefined) { uri = file!; wait = 'yes'; }
  const text = evaluate(f, uri, ADD_PREFIX);
  if (text === undefined) return SSI_ERROR;
  const target = parseUnsafeUri(f.r, text);
  if (!target) return SSI_ERROR;

  let block: SsiBlock | undefined;
  if (stub !== undefined) {
    block = f.mctx.blocks.find((b) => b.name === stub);
    if (!block) {
      f.log.error(`"stub"="${stub}" for "include" not found`);
      return SSI_ERROR;
    }
  }
  let memory: MemorySink | undefined;
  let setName: string | undefined;
  if (set !== undefined) {
    setName = set.toLowerCase();
    if (!f.mctx.variables.has(setName)) f.mctx.variables.set(setName, '');
    memory = new MemorySink();
  }
  const place = memory ? undefined : f.place();
  const sink = memory ?? (block ? new StubSink(place!, block) : place!);
  const sub = createSubrequest(f.r, target.uri, target.args, {
    sink,
    inMemory: memory !== undefined,
    onFinalize: block ? (sr) => stubOutput(sr, block) : undefined,
  });
  if (!sub) {
    place?.end();
    return SSI_ERROR;
  }
  if (memory) memory.sub = sub;
  f.post(sub);
  if (wait === undefined && set === undefined) return SSI_OK;
  return f.wait(sub).then((alive) => {
    if (alive && memory && setName !== undefined) {
      const sr = sub.r;
      if (sr.headerSent && sr.status < 300 && !memory.tooBig) f.mctx.variables.set(setName, memory.value());
    }
    return SSI_OK;
  });
}

/** `stub=`: the block goes out as the subrequest's response when it ends with an error status. */
async function stubOutput(sr: HttpRequest, block: SsiBlock): Promise<boolean> {
  sr.contentType = sr.parent!.contentType;
  await sendHeader(sr);
  for (const b of block.bufs) sendBody(sr, b);
  endBody(sr);
  return true;
}

/** A stub include's body: the block goes in its place when the response body is empty. */
class StubSink extends Writable {
  private readonly next: Writable;
  private readonly block: SsiBlock;
  private bytes = 0;

  constructor(next: Writable, block: SsiBlock) {
    super();
    this.next = next;
    this.block = block;
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.bytes += chunk.length;
    if (this.next.write(chunk)) cb();
    else this.next.once('drain', () => cb());
  }

  override _final(cb: (err?: Error | null) => void): void {
    if (this.bytes === 0) for (const b of this.block.bufs) this.next.write(b);
    this.next.end(cb);
  }
}

/** The body of an `include ... set=` subrequest, kept in memory up to the limit. */
class MemorySink extends Writable {
  sub: Subrequest | undefined;
  tooBig = false;
  private readonly chunks: Buffer[] = [];
  private bytes = 0;

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.tooBig) { cb(); return; }
    const sr = this.sub!.r;
    // subrequest_output_buffer_size of the location that answers
    const limit = sr.level.get(coreLoc).subrequestOutputBufferSize ?? CORE_LOC_DEFAULTS.subrequestOutputBufferSize;
    const declared = sr.contentLength;
    if (this.bytes === 0 && declared !== undefined && declared > limit) return this.fail(`too big subrequest response: ${declared}`, cb);
    if (this.bytes + chunk.length > limit) return this.fail('too big subrequest response', cb);
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    cb();
  }

  /** nginx fails the subrequest, which ends the client's request. */
  private fail(msg: string, cb: () => void): void {
    this.tooBig = true;
    const sr = this.sub?.r;
    if (sr) {
      requestLog(sr).error(msg);
      sr.res.destroy();
    }
    cb();
  }

  value(): string {
    return Buffer.concat(this.chunks, this.bytes).toString('latin1');
  }
}

function echo(f: SsiRun, p: Params): number {
  const name = p.get('var')!.toLowerCase();
  let value = ssiVariable(f, name);
  if (value === undefined) value = p.get('default') ?? '(none)';
  if (value === '') return SSI_OK;
  const enc = p.get('encoding');
  if (enc !== undefined) {
    if (enc === 'none') f.ctx.encoding = ENC_NONE;
    else if (enc === 'url') f.ctx.encoding = ENC_URL;
    else if (enc === 'entity') f.ctx.encoding = ENC_ENTITY;
    else f.log.error(`unknown encoding "${enc}" in the "echo" command`);
  }
  if (f.ctx.encoding === ENC_URL) value = escapeUrl(value);
  else if (f.ctx.encoding === ENC_ENTITY) value = escapeEntity(value);
  f.send(Buffer.from(value, 'latin1'));
  return SSI_OK;
}

function config(f: SsiRun, p: Params): number {
  const timefmt = p.get('timefmt');
  if (timefmt !== undefined) f.ctx.timefmt = timefmt;
  const errmsg = p.get('errmsg');
  if (errmsg !== undefined) f.ctx.errmsg = errmsg;
  return SSI_OK;
}

function set(f: SsiRun, p: Params): number {
  const value = evaluate(f, p.get('value')!);
  if (value === undefined) return SSI_ERROR;
  f.mctx.variables.set(p.get('var')!.toLowerCase(), value);
  return SSI_OK;
}

const regexCache = new Map<string, RegExp | string>();

/** A regex of an `if` (compiled once per pattern); a string is the compile error. */
function regexFor(pattern: string): RegExp | string {
  let re = regexCache.get(pattern);
  if (re === undefined) {
    try {
      re = compileRegex(undefined, pattern).regex;
    } catch (err) {
      re = (err as Error).message;
    }
    if (regexCache.size > 256) regexCache.clear();
    regexCache.set(pattern, re);
  }
  return re;
}

/** Matches `subject`; sets the captures and named groups as SSI variables. */
function regexMatch(f: SsiRun, pattern: string, subject: string): boolean | undefined {
  const re = regexFor(pattern);
  if (typeof re === 'string') {
    f.log.error(re);
    return undefined;
  }
  re.lastIndex = 0;
  const m = re.exec(subject);
  if (!m) return false;
  let n = m.length;
  while (n > 1 && m[n - 1] === undefined) n--;
  f.mctx.captures = Array.from({ length: n }, (_, i) => m[i] ?? '');
  if (m.groups) for (const [k, v] of Object.entries(m.groups)) f.mctx.variables.set(k.toLowerCase(), v ?? '');
  return true;
}

/** Characters of an `if` expression's left operand (the rest is an operator and the right operand). */
function isLeftChar(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x24 || c === 0x7b || c === 0x7d || c === 0x5f || c === 0x22 || c === 0x27;
}

function ifCommand(f: SsiRun, p: Params, elif: boolean): number {
  const ctx = f.ctx;
  if (!elif && ctx.conditional) {
    f.log.error('the "if" command inside the "if" command');
    return SSI_ERROR;
  }
  if (ctx.outputChosen) {
    ctx.output = false;
    return SSI_OK;
  }
  const expr = p.get('expr')!;
  // the left operand, with its capitals lowered as nginx does in place
  let i = 0;
  let leftText = '';
  for (; i < expr.length; i++) {
    let c = expr.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) c |= 0x20;
    else if (!isLeftChar(c)) break;
    leftText += String.fromCharCode(c);
  }
  while (expr[i] === ' ') i++;
  const left = evaluate(f, leftText);
  if (left === undefined) return SSI_ERROR;
  let result: boolean;
  if (i === expr.length) {
    result = left !== '';
  } else {
    let negative: boolean;
    if (expr[i] === '=') { negative = false; i++; } else if (expr[i] === '!' && expr[i + 1] === '=') { negative = true; i += 2; } else {
      f.log.error(`invalid expression in "${expr}"`);
      return SSI_ERROR;
    }
    while (expr[i] === ' ') i++;
    let last = expr.length;
    let regex = false;
    if (i < last - 1 && expr[i] === '/') {
      if (expr[last - 1] !== '/') {
        f.log.error(`invalid expression in "${expr}"`);
        return SSI_ERROR;
      }
      regex = true;
      last--;
      i++;
    } else if (i < last - 1 && expr[i] === '\\' && expr[i + 1] === '/') {
      i++;
    }
    const right = evaluate(f, expr.slice(i, last));
    if (right === undefined) return SSI_ERROR;
    let equal: boolean;
    if (regex) {
      const m = regexMatch(f, right, left);
      if (m === undefined) return SSI_ERROR;
      equal = m;
    } else {
      equal = left === right;
    }
    result = equal !== negative;
  }
  ctx.output = result;
  if (result) ctx.outputChosen = true;
  ctx.conditional = COND_IF;
  return SSI_OK;
}

function block(f: SsiRun, p: Params): number {
  f.mctx.blocks.push({ name: p.get('name')!, bufs: [] });
  f.ctx.output = false;
  f.ctx.block = true;
  return SSI_OK;
}

function command(params: string[], mandatory: string[], run: SsiCommand['run'], opts: Partial<Pick<SsiCommand, 'conditional' | 'block' | 'flush'>> = {}): SsiCommand {
  return { params, mandatory, run, conditional: opts.conditional ?? 0, block: opts.block ?? false, flush: opts.flush ?? false };
}

export const SSI_COMMANDS = new Map<string, SsiCommand>([
  ['include', command(['virtual', 'file', 'wait', 'set', 'stub'], [], include, { flush: true })],
  ['echo', command(['var', 'default', 'encoding'], ['var'], echo)],
  ['config', command(['errmsg', 'timefmt'], [], config)],
  ['set', command(['var', 'value'], ['var', 'value'], set)],
  ['if', command(['expr'], ['expr'], (f, p) => ifCommand(f, p, false))],
  ['elif', command(['expr'], ['expr'], (f, p) => ifCommand(f, p, true), { conditional: COND_IF })],
  ['else', command([], [], (f) => {
    f.ctx.output = !f.ctx.outputChosen;
    f.ctx.conditional = COND_ELSE;
    return SSI_OK;
  }, { conditional: COND_IF })],
  ['endif', command([], [], (f) => {
    f.ctx.output = true;
    f.ctx.outputChosen = false;
    f.ctx.conditional = 0;
    return SSI_OK;
  }, { conditional: COND_ELSE })],
  ['block', command(['name'], ['name'], block)],
  ['endblock', command([], [], (f) => {
    f.ctx.output = true;
    f.ctx.block = false;
    return SSI_OK;
  }, { block: true })],
]);
