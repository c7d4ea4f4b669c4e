/**
 * nginx writes regular expressions for PCRE; JavaScript's RegExp is close.
 * This turns the PCRE spellings nginx configs use into JavaScript ones
 * (`(?P<name>`, `(?i)` at the start) and reports failures as nginx does.
 */
import type { ConfContext } from '../conf/context.ts';

export interface CompiledRegex {
  regex: RegExp;
  /** Number of capture groups ($1..$n). */
  captures: number;
  /** Named groups, usable as variables. */
  names: string[];
}

export function compileRegex(cf: ConfContext | undefined, pattern: string, caseless = false): CompiledRegex {
  let src = pattern;
  let flags = caseless ? 'i' : '';
  const inline = /^\(\?([imsx]+)\)/.exec(src);
  if (inline) {
    src = src.slice(inline[0].length);
    if (inline[1].includes('i') && !flags.includes('i')) flags += 'i';
    if (inline[1].includes('s')) flags += 's';
    if (inline[1].includes('m')) flags += 'm';
  }
  src = src.replace(/\(\?P?<([A-Za-z_][A-Za-z0-9_]*)>/g, '(?<$1>').replace(/\(\?P=([A-Za-z_]\w*)\)/g, '\\k<$1>');
  src = src.replace(/\(\?'([A-Za-z_]\w*)'/g, '(?<$1>');
  src = src.replace(/\\Z/g, '$').replace(/\\A/g, '^').replace(/\\z/g, '$');
  let regex: RegExp;
  try {
    regex = new RegExp(src, flags);
  } catch (err) {
    const msg = `pcre2_compile() failed: ${(err as Error).message.replace(/^Invalid regular expression: /, '')} in "${pattern}"`;
    if (cf) throw cf.error(msg);
    throw new Error(msg);
  }
  const captures = new RegExp(`${regex.source}|`, flags).exec('')!.length - 1;
  const names = [...src.matchAll(/\(\?<([A-Za-z_][A-Za-z0-9_]*)>/g)].map((m) => m[1]);
  return { regex, captures, names };
}
