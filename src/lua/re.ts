/**
 * OpenResty's `ngx.re` table: match, find, gmatch, sub, gsub, with PCRE semantics on bytes.
 * Patterns are translated once (pcre.ts) and cached (all of them, not only with `o`: up to 1024, as
 * lua_regex_cache_max_entries). Subjects are matched as latin1 views of their bytes, so offsets
 * are byte offsets; with `u`/`U` the subject is decoded from UTF-8 and offsets mapped back.
 * Unmatched captures are `false`; errors are returned, not raised, as OpenResty does:
 * match/gmatch `nil, err`, find/sub/gsub `nil, nil, err`. Options: a d(refused) D i j J m o s u U x.
 * After an empty match the next search starts one character later (JavaScript's rule; PCRE first
 * retries a non-empty match at the same place — differs only for patterns like `a??`).
 */
import { type HostFunction, type LuaBridge, LuaError, T } from './bridge.ts';
import { PcreError, type TranslatedPattern, translatePcre } from './pcre.ts';

export interface Compiled {
  readonly regex: RegExp;
  readonly withIndices: RegExp;
  readonly pattern: TranslatedPattern;
  readonly utf8: boolean;
}

/** A subject as matched: `text` is the latin1 view, or the decoded text in UTF-8 mode. */
class Subject {
  readonly bytes: string;
  readonly text: string;
  readonly utf8: boolean;
  constructor(bytes: string, utf8: boolean) {
    this.bytes = bytes;
    this.utf8 = utf8;
    this.text = utf8 ? Buffer.from(bytes, 'latin1').toString('utf8') : bytes;
  }
  index(byteOffset: number): number {
    return this.utf8 ? Buffer.from(this.bytes.slice(0, byteOffset), 'latin1').toString('utf8').length : byteOffset;
  }
  byteOffset(index: number): number {
    return this.utf8 ? Buffer.byteLength(this.text.slice(0, index), 'utf8') : index;
  }
  out(s: string): string {
    return this.utf8 ? Buffer.from(s, 'utf8').toString('latin1') : s;
  }
  /** Where the search goes on after a match ending at `end` (text index); one character on if it was empty. */
  next(start: number, end: number): number {
    if (end > start) return end;
    const code = this.text.codePointAt(end);
    return end + (this.utf8 && code !== undefined && code > 0xffff ? 2 : 1);
  }
}

const CACHE_MAX = 1024;
const cache = new Map<string, Compiled>();

/** Group openers (plain, non-capturing, named) and then `\G`, at the start of a pattern. */
const LEADING_G = /^(?:\((?:\?:|\?P?<[A-Za-z_]\w*>|\?'[A-Za-z_]\w*')?)*\\G/;

/** A PCRE pattern with ngx.re's options as a JavaScript RegExp (cached); throws PcreError with the reason. */
export function compile(pattern: string, options: string): Compiled {
  const key = options + '\0' + pattern;
  const hit = cache.get(key);
  if (hit) return hit;
  let caseless = false, multiline = false, dotall = false, extended = false, utf8 = false, anchored = false;
  for (const flag of options) {
    switch (flag) {
      case 'i': caseless = true; break;
      case 'm': multiline = true; break;
      case 's': dotall = true; break;
      case 'x': extended = true; break;
      case 'u': case 'U': utf8 = true; break;
      case 'a': anchored = true; break;
      case 'j': case 'o': case 'J': case 'D': break;
      case 'd': throw new PcreError('the DFA mode (option d) is not supported by Gatehouse\'s regex engine');
      default: throw new LuaError(`unknown flag "${flag}" (flags "${options}")`);
    }
  }
  let source = utf8 ? Buffer.from(pattern, 'latin1').toString('utf8') : pattern;
  // \G before anything that consumes, with no alternation: the match starts where the search does,
  // which is the `a` option (a sticky RegExp); \G elsewhere stays refused by the translation
  const leadingG = LEADING_G.exec(source);
  if (leadingG && !source.includes('|')) {
    source = source.slice(0, leadingG[0].length - 2) + source.slice(leadingG[0].length);
    anchored = true;
  }
  const translated = translatePcre(source, { caseless, multiline, dotall, extended, utf8 });
  const flags = (anchored ? 'y' : 'g') + (caseless ? 'i' : '') + (utf8 ? 'u' : '');
  let compiled: Compiled;
  try {
    compiled = { regex: new RegExp(translated.source, flags), withIndices: new RegExp(translated.source, flags + 'd'), pattern: translated, utf8 };
  } catch (e) {
    throw new PcreError((e as Error).message.replace(/^Invalid regular expression: \/.*\/[a-z]*: /s, ''));
  }
  if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
  cache.set(key, compiled);
  return compiled;
}

function compileMessage(e: PcreError, pattern: string): string {
  return `pcre_compile() failed: ${e.message} in "${pattern}"`;
}

/** Why `pattern` does not compile, in OpenResty's words (resty.core.regex's re_match_compile), or undefined. */
export function compileError(pattern: string, options: string): string | undefined {
  try {
    compile(pattern, options);
    return undefined;
  } catch (e) {
    if (!(e instanceof PcreError)) throw e;
    return compileMessage(e, pattern);
  }
}

export function regexTable(bridge: LuaBridge): HostFunction {
  const { api } = bridge;

  const args = (L: number, fname: string, withSubject = true) => {
    const subject = bridge.toString(L, 1);
    if (withSubject && subject === undefined) throw new LuaError(`bad argument #1 to '${fname}' (string expected, got ${bridge.typeName(L, 1)})`);
    const pattern = bridge.toString(L, 2);
    if (pattern === undefined) throw new LuaError(`bad argument #2 to '${fname}' (string expected, got ${bridge.typeName(L, 2)})`);
    return { subject: subject ?? '', pattern, options: bridge.toString(L, fname === 'sub' || fname === 'gsub' ? 4 : 3) ?? '' };
  };
  /** The compiled pattern, or the error message in OpenResty's wording. */
  const compileOr = (pattern: string, options: string): Compiled | string => {
    try {
      return compile(pattern, options);
    } catch (e) {
      if (!(e instanceof PcreError)) throw e;
      return compileMessage(e, pattern);
    }
  };
  const fail = (L: number, nils: number, message: string) => {
    for (let i = 0; i < nils; i++) bridge.pushNil(L);
    bridge.pushString(L, message);
    return nils + 1;
  };
  /** ctx.pos (1-based byte position) of the table at `idx`, if there is one. */
  const ctxPos = (L: number, idx: number): number => {
    if (api.lua_type(L, idx) !== T.TABLE) return 0;
    bridge.getField(L, idx, 'pos');
    const pos = bridge.toInteger(L, -1);
    api.lua_settop(L, -2);
    return pos === undefined ? 0 : Math.max(0, pos - 1);
  };
  const setCtxPos = (L: number, idx: number, bytePos: number) => {
    if (api.lua_type(L, idx) !== T.TABLE) return;
    bridge.pushInteger(L, bytePos + 1);
    bridge.setField(L, idx, 'pos');
  };
  const exec = (c: Compiled, s: Subject, byteStart: number, indices = false): RegExpExecArray | null => {
    if (byteStart > s.bytes.length) return null;
    const regex = indices ? c.withIndices : c.regex;
    regex.lastIndex = s.index(byteStart);
    return regex.exec(s.text);
  };
  const capture = (c: Compiled, m: RegExpExecArray, n: number): string | undefined => (n === 0 ? m[0] : m.groups?.[`_${n}`]);
  const pushCaptures = (L: number, c: Compiled, s: Subject, m: RegExpExecArray) => {
    const { captures, names } = c.pattern;
    api.lua_checkstack(L, 4);
    api.lua_createtable(L, captures, 1 + names.size);
    for (let n = 0; n <= captures; n++) {
      const v = capture(c, m, n);
      if (v === undefined) bridge.pushBoolean(L, false);
      else bridge.pushString(L, s.out(v));
      api.lua_rawseti(L, -2, BigInt(n));
    }
    for (const [name, groups] of names) {
      const v = groups.map((g) => capture(c, m, g)).find((x) => x !== undefined);
      if (v === undefined) bridge.pushBoolean(L, false);
      else bridge.pushString(L, s.out(v));
      bridge.setField(L, -2, name);
    }
  };
  const matchEnd = (m: RegExpExecArray) => ({ start: m.index, end: m.index + m[0].length });

  /** sub/gsub's template: `$0`..`$99`, `${N}`, `$$`; anything else after `$` (names too, as OpenResty) is an error. */
  const template = (text: string): Array<string | number> | null => {
    const parts: Array<string | number> = [];
    let literal = '';
    for (let i = 0; i < text.length; i++) {
      if (text[i] !== '$') { literal += text[i]; continue; }
      const m = /^\$(?:(\d+)|\{(\d+)\}|(\$))/.exec(text.slice(i));
      if (!m) return null;
      i += m[0].length - 1;
      if (m[3]) { literal += '$'; continue; }
      if (literal) parts.push(literal);
      literal = '';
      parts.push(Number(m[1] ?? m[2]));
    }
    if (literal) parts.push(literal);
    return parts;
  };

  const replace = (L: number, global: boolean): number => {
    const fname = global ? 'gsub' : 'sub';
    const { subject, pattern, options } = args(L, fname);
    const c = compileOr(pattern, options);
    if (typeof c === 'string') return fail(L, 2, c);
    const useFunction = api.lua_type(L, 3) === T.FUNCTION;
    let parts: Array<string | number> | null = null;
    if (!useFunction) {
      const text = bridge.toString(L, 3);
      if (text === undefined) throw new LuaError(`bad argument #3 to '${fname}' (string expected, got ${bridge.typeName(L, 3)})`);
      parts = template(text);
      if (!parts) return fail(L, 2, 'failed to compile the replacement template');
    }
    const s = new Subject(subject, c.utf8);
    let result = '';
    let copied = 0; // byte offset in the subject copied so far
    let count = 0;
    for (let pos = 0; ;) {
      const m = exec(c, s, pos);
      if (!m) break;
      const { start, end } = matchEnd(m);
      const byteStart = s.byteOffset(start);
      result += subject.slice(copied, byteStart);
      if (parts) {
        for (const part of parts) {
          if (typeof part === 'string') result += part;
          else {
            const v = part > c.pattern.captures ? undefined : capture(c, m, part);
            if (v !== undefined) result += s.out(v);
          }
        }
      } else {
        api.lua_pushvalue(L, 3);
        pushCaptures(L, c, s, m);
        api.lua_callk(L, 1, 1, 0, 0);
        result += bridge.toString(L, -1) ?? '';
        api.lua_settop(L, -2);
      }
      count++;
      copied = s.byteOffset(end);
      if (!global) break;
      const next = s.next(start, end);
      if (next > s.text.length) break;
      pos = s.byteOffset(next);
    }
    bridge.pushString(L, result + subject.slice(copied));
    bridge.pushInteger(L, count);
    return 2;
  };

  const functions: Record<string, HostFunction> = {
    match(L) {
      const { subject, pattern, options } = args(L, 'match');
      const c = compileOr(pattern, options);
      if (typeof c === 'string') return fail(L, 1, c);
      const s = new Subject(subject, c.utf8);
      const m = exec(c, s, ctxPos(L, 4));
      if (!m) { bridge.pushNil(L); return 1; }
      setCtxPos(L, 4, s.byteOffset(matchEnd(m).end));
      pushCaptures(L, c, s, m); // a new table each time: the res_table argument is not reused
      return 1;
    },
    find(L) {
      const { subject, pattern, options } = args(L, 'find');
      const c = compileOr(pattern, options);
      if (typeof c === 'string') return fail(L, 2, c);
      const nth = bridge.toInteger(L, 5) ?? 0;
      if (nth > c.pattern.captures) return fail(L, 2, 'nth out of bound');
      const s = new Subject(subject, c.utf8);
      const m = exec(c, s, ctxPos(L, 4), nth > 0);
      if (!m) { bridge.pushNil(L); return 1; }
      setCtxPos(L, 4, s.byteOffset(matchEnd(m).end));
      const span = nth > 0 ? m.indices?.groups?.[`_${nth}`] : [m.index, m.index + m[0].length];
      if (!span) { bridge.pushNil(L); return 1; }
      bridge.pushInteger(L, s.byteOffset(span[0]) + 1);
      bridge.pushInteger(L, s.byteOffset(span[1]));
      return 2;
    },
    sub: (L) => replace(L, false),
    gsub: (L) => replace(L, true),
  };
  // gmatch's iterator is a Lua closure over these two (a host function per call would leak ids)
  const gmatchHelpers: Record<string, HostFunction> = {
    check(L) {
      const c = compileOr(bridge.toString(L, 1) ?? '', bridge.toString(L, 2) ?? '');
      if (typeof c === 'string') return fail(L, 1, c);
      bridge.pushBoolean(L, true);
      return 1;
    },
    step(L) {
      const { subject, pattern, options } = args(L, 'gmatch');
      const c = compile(pattern, options);
      const s = new Subject(subject, c.utf8);
      bridge.getField(L, 4, 'pos');
      const pos = bridge.toInteger(L, -1) ?? 0;
      api.lua_settop(L, 4);
      const m = exec(c, s, pos);
      if (!m) return 0;
      const { start, end } = matchEnd(m);
      const next = s.next(start, end);
      bridge.pushInteger(L, next > s.text.length ? s.bytes.length + 1 : s.byteOffset(next));
      bridge.setField(L, 4, 'pos');
      pushCaptures(L, c, s, m);
      return 1;
    },
  };
  let gmatchRef = 0;

  return (L) => {
    if (!gmatchRef) {
      bridge.load(L, GMATCH, 'ngx.re.gmatch');
      api.lua_createtable(L, 0, 2);
      bridge.setFunctions(L, -1, gmatchHelpers);
      api.lua_callk(L, 1, 1, 0, 0);
      gmatchRef = bridge.ref(L);
    }
    api.lua_createtable(L, 0, 5);
    bridge.setFunctions(L, -1, functions);
    bridge.pushRef(L, gmatchRef);
    bridge.setField(L, -2, 'gmatch');
    return 1;
  };
}

const GMATCH = `local host = ...
local check, step = host.check, host.step
return function(subject, regex, options)
  if type(subject) ~= 'string' and type(subject) ~= 'number' then
    error("bad argument #1 to 'gmatch' (string expected, got " .. type(subject) .. ")", 2)
  end
  local ok, err = check(regex, options)
  if not ok then return nil, err end
  local state = { pos = 0 }
  return function()
    if not state.pos then return nil end
    local m = step(subject, regex, options, state)
    if not m then state.pos = nil end
    return m
  end
end`;
