/**
 * The SSI commands (include, echo, config, set, if/elif/else/endif,
 * block/endblock): their parameters, `if` expressions with string and regex
 * comparisons, echo's encodings — with nginx's error messages.
 */
import { compileRegex } from '../../regex.ts';
import { COND_ELSE, COND_IF, ENC_ENTITY, ENC_NONE, ENC_URL, SSI_ERROR, SSI_OK } from './context.ts';
import type { SsiParams, SsiRun } from './context.ts';
import { evaluate, ssiVariable } from './evaluate.ts';
import { include } from './include.ts';

export interface SsiCommand {
  params: readonly string[];
  mandatory: readonly string[];
  /** Allowed only after `if` (COND_IF) or also after `else` (COND_ELSE). */
  conditional: number;
  /** Runs even while a block is being collected (endblock). */
  block: boolean;
  /** What was emitted goes out before it runs (include). */
  flush: boolean;
  run(f: SsiRun, p: SsiParams): number | Promise<number>;
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

function echo(f: SsiRun, p: SsiParams): number {
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

function config(f: SsiRun, p: SsiParams): number {
  const timefmt = p.get('timefmt');
  if (timefmt !== undefined) f.ctx.timefmt = timefmt;
  const errmsg = p.get('errmsg');
  if (errmsg !== undefined) f.ctx.errmsg = errmsg;
  return SSI_OK;
}

function set(f: SsiRun, p: SsiParams): number {
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

function ifCommand(f: SsiRun, p: SsiParams, elif: boolean): number {
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

function block(f: SsiRun, p: SsiParams): number {
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

