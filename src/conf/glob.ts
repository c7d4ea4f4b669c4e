/**
 * glob(3) as nginx calls it for `include` (glibc, flags 0): `*`, `?` and
 * `[...]` match within one path component, `\` escapes, a leading `.` in a
 * name must be matched by a literal `.` (so `*` skips hidden files, and `.*`
 * also matches `.` and `..`), and the matches come back sorted bytewise.
 * No match is not an error. Paths are byte strings (latin1).
 */
import fs from 'node:fs';

/** nginx's test for "this include is a pattern" (strpbrk(name, "*?[")). */
export function isGlobPattern(name: string): boolean {
  return /[*?[]/.test(name);
}

/** The existing paths an absolute `pattern` matches, sorted bytewise. */
export function globSync(pattern: string): string[] {
  const parts = pattern.split('/');
  let paths = [parts[0]];
  for (let i = 1; i < parts.length; i++) {
    const part = parts[i];
    const last = i === parts.length - 1;
    const matcher = componentMatcher(part);
    const next: string[] = [];
    for (const dir of paths) {
      if (!matcher) {
        next.push(`${dir}/${unescapeLiteral(part)}`);
        continue;
      }
      for (const name of listDir(dir === '' ? '/' : dir, part.startsWith('.') || part.startsWith('\\.'))) {
        if (matcher(name)) next.push(`${dir}/${name}`);
      }
    }
    paths = last ? next : next.filter(isDirectory);
    if (paths.length === 0) return [];
  }
  return paths.filter(exists).sort();
}

function listDir(dir: string, withDots: boolean): string[] {
  try {
    const names = fs.readdirSync(Buffer.from(dir, 'latin1'), { encoding: 'latin1' });
    return withDots ? ['.', '..', ...names] : names;
  } catch {
    // glob(3) without GLOB_ERR skips unreadable directories
    return [];
  }
}

function isDirectory(p: string): boolean {
  return fs.statSync(Buffer.from(p || '/', 'latin1'), { throwIfNoEntry: false })?.isDirectory() ?? false;
}

function exists(p: string): boolean {
  try {
    fs.lstatSync(Buffer.from(p, 'latin1'));
    return true;
  } catch {
    return false;
  }
}

function unescapeLiteral(part: string): string {
  return part.replace(/\\(.)/gs, '$1');
}

const CLASSES: Record<string, string> = {
  alpha: 'a-zA-Z', digit: '0-9', alnum: 'a-zA-Z0-9', upper: 'A-Z', lower: 'a-z', space: ' \\t\\n\\r\\f\\v',
  xdigit: '0-9A-Fa-f', punct: '!-\\/:-@\\[-`{-~', blank: ' \\t', cntrl: '\\x00-\\x1f\\x7f', print: ' -~', graph: '!-~',
};

/** A matcher for one pattern component, or undefined when it has no wildcard. */
function componentMatcher(part: string): ((name: string) => boolean) | undefined {
  let re = '';
  let magic = false;
  for (let i = 0; i < part.length; i++) {
    const ch = part[i];
    if (ch === '\\' && i + 1 < part.length) {
      re += escapeRe(part[++i]);
    } else if (ch === '*') {
      re += '[^]*';
      magic = true;
    } else if (ch === '?') {
      re += '[^]';
      magic = true;
    } else if (ch === '[') {
      const cls = bracket(part, i);
      if (cls) {
        re += cls.re;
        i = cls.end;
        magic = true;
      } else {
        re += '\\[';
      }
    } else {
      re += escapeRe(ch);
    }
  }
  if (!magic) return undefined;
  const rx = new RegExp(`^${re}$`);
  const leadingDot = part.startsWith('.') || part.startsWith('\\.');
  return (name) => (leadingDot || name[0] !== '.') && rx.test(name);
}

/** A `[...]` expression at `at`: its regex class and the index of its `]`, or undefined when unclosed. */
function bracket(part: string, at: number): { re: string; end: number } | undefined {
  let i = at + 1;
  let negate = false;
  if (part[i] === '!' || part[i] === '^') { negate = true; i++; }
  let body = '';
  let first = true;
  for (; i < part.length; i++) {
    const ch = part[i];
    if (ch === ']' && !first) return { re: `[${negate ? '^' : ''}${body}]`, end: i };
    first = false;
    if (ch === '[' && part[i + 1] === ':') {
      const close = part.indexOf(':]', i + 2);
      const name = close > 0 ? part.slice(i + 2, close) : '';
      if (name in CLASSES) { body += CLASSES[name]; i = close + 1; continue; }
    }
    if (ch === '\\' && i + 1 < part.length) { body += escapeRe(part[++i]); continue; }
    body += ch === '-' ? '-' : escapeRe(ch);
  }
  return undefined;
}

function escapeRe(ch: string): string {
  return /[\\^$.*+?()[\]{}|\/-]/.test(ch) ? `\\${ch}` : ch;
}
