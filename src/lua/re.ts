/**
 * OpenResty's `ngx.re` table: match, find, gmatch, sub, gsub, with PCRE semantics on bytes.
 * Patterns are translated once (pcre.ts) and cached (all of them, not only with `o`: up to 1024, as
 * lua_regex_cache_max_entries). Subjects are matched as latin1 views of their bytes, so offsets
 * are byte offsets; with `u`/`U` the subject is decoded from UTF-8 and offsets mapped back.
 * Unmatched captures are `false`; errors are returned, not raised, as OpenResty does:
 * match/gmatch `nil, err`, find/sub/gsub `nil, nil, err`. Options: a d(refused) D i j J m o s u U x.
 * After an empty match the next search starts one byte later, as lua-resty-core's loops do.
 */
import { type HostFunction, type LuaBridge, LuaError, T } from './bridge.ts';
import { PcreError, type TranslatedPattern, translatePcre } from './pcre.ts';
import { ExecError, Subject } from './re-subject.ts';
import { parseTemplate, TEMPLATE_ERROR, type TemplateParts } from './re-template.ts';

export interface Compiled {
  readonly regex: RegExp;
  readonly withIndices: RegExp;
  readonly pattern: TranslatedPattern;
  readonly utf8: boolean;
  /** `u` (not `U`): PCRE checks that the subject is UTF-8 and that a search starts on a character. */
  readonly utf8Check: boolean;
  /** The D option: each name is a table of the values its groups matched. */
  readonly dupnames: boolean;
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
  let caseless = false, multiline = false, dotall = false, extended = false, utf8 = false, utf8Check = false, anchored = false;
  let dupnames = false, javascript = false;
  for (const flag of options) {
    switch (flag) {
      case 'i': caseless = true; break;
      case 'm': multiline = true; break;
      case 's': dotall = true; break;
      case 'x': extended = true; break;
      case 'u': utf8 = true; utf8Check = true; break;
      case 'U': utf8 = true; break;
      case 'a': anchored = true; break;
      case 'D': dupnames = true; break;
      case 'J': javascript = true; break;
      case 'j': case 'o': break;
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
  let translated: TranslatedPattern;
  try {
    translated = translatePcre(source, { caseless, multiline, dotall, extended, utf8, dupnames, javascript });
  } catch (e) {
    // PCRE's offset is in bytes of the pattern as given: count back from its end
    if (e instanceof PcreError && e.offset !== undefined) {
      throw new PcreError(e.message, pattern.length - Buffer.byteLength(source.slice(e.offset), utf8 ? 'utf8' : 'latin1'));
    }
    throw e;
  }
  const flags = (anchored ? 'y' : 'g') + (caseless ? 'i' : '') + (utf8 ? 'u' : '');
  let compiled: Compiled;
  try {
    compiled = {
      regex: new RegExp(translated.source, flags), withIndices: new RegExp(translated.source, flags + 'd'),
      pattern: translated, utf8, utf8Check, dupnames,
    };
  } catch (e) {
    throw new PcreError((e as Error).message.replace(/^Invalid regular expression: \/.*\/[a-z]*: /s, ''));
  }
  if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
  cache.set(key, compiled);
  return compiled;
}

function compileMessage(e: PcreError, pattern: string): string {
  const at = e.offset !== undefined && e.offset < pattern.length ? ` at "${pattern.slice(e.offset)}"` : '';
  return `pcre_compile() failed: ${e.message} in "${pattern}"${at}`;
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

/** The `ngx.re` table's pusher; `logError` takes what OpenResty logs at [error] with no request (a bad template). */
export function regexTable(bridge: LuaBridge, logError: (message: string) => void = () => {}): HostFunction {
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
  /** The match from `byteStart` on, or null; throws ExecError where PCRE's UTF-8 check fails. */
  const exec = (c: Compiled, s: Subject, byteStart: number, indices = false): RegExpExecArray | null => {
    if (byteStart > s.bytes.length) return null;
    const refused = s.refusal(byteStart);
    if (refused) throw new ExecError(refused);
    const regex = indices ? c.withIndices : c.regex;
    regex.lastIndex = s.index(byteStart);
    return regex.exec(s.text);
  };
  const capture = (c: Compiled, m: RegExpExecArray, n: number): string | undefined => (n === 0 ? m[0] : m.groups?.[`_${n}`]);
  const pushCapture = (L: number, s: Subject, v: string | undefined) => {
    if (v === undefined) bridge.pushBoolean(L, false);
    else bridge.pushString(L, s.out(v));
  };
  /**
   * The captures as OpenResty's table: 0..n (unmatched `false`) and each name; with D a name is a
   * table of what its groups matched (absent if none did), else the value of its last group.
   * Filled into the table at `into` (match's res_table: other keys stay) or a new one.
   */
  const pushCaptures = (L: number, c: Compiled, s: Subject, m: RegExpExecArray, into = 0) => {
    const { captures, names } = c.pattern;
    api.lua_checkstack(L, 4);
    if (into) api.lua_pushvalue(L, into);
    else api.lua_createtable(L, captures, 1 + names.size);
    for (let n = 0; n <= captures; n++) {
      pushCapture(L, s, capture(c, m, n));
      api.lua_rawseti(L, -2, BigInt(n));
    }
    for (const [name, groups] of names) {
      if (!c.dupnames) {
        pushCapture(L, s, capture(c, m, groups[groups.length - 1]!));
        bridge.setField(L, -2, name);
        continue;
      }
      const matched = groups.map((g) => capture(c, m, g)).filter((x) => x !== undefined);
      if (matched.length === 0) continue;
      api.lua_createtable(L, matched.length, 0);
      matched.forEach((v, k) => { pushCapture(L, s, v); api.lua_rawseti(L, -2, BigInt(k + 1)); });
      bridge.setField(L, -2, name);
    }
  };
  /** `fn`, with a failed UTF-8 check returned as its error after `nils` nils. */
  const refusing = (nils: number, fn: HostFunction): HostFunction => (L) => {
    try {
      return fn(L);
    } catch (e) {
      if (e instanceof ExecError) return fail(L, nils, e.message);
      throw e;
    }
  };
  /** Lua's tostring() of the value on top (a replacement function's result that is no string). */
  const luaToString = (L: number): string => {
    bridge.getGlobal(L, 'tostring');
    api.lua_pushvalue(L, -2);
    api.lua_callk(L, 1, 1, 0, 0);
    const text = bridge.toString(L, -1) ?? '';
    api.lua_settop(L, -2);
    return text;
  };
  const matchEnd = (m: RegExpExecArray) => ({ start: m.index, end: m.index + m[0].length });

  const replace = (L: number, global: boolean): number => {
    const fname = global ? 'gsub' : 'sub';
    const { subject, pattern, options } = args(L, fname);
    const c = compileOr(pattern, options);
    if (typeof c === 'string') return fail(L, 2, c);
    const useFunction = api.lua_type(L, 3) === T.FUNCTION;
    let parts: TemplateParts | null = null;
    if (!useFunction) {
      const text = bridge.toString(L, 3);
      if (text === undefined) throw new LuaError(`bad argument #3 to '${fname}' (string expected, got ${bridge.typeName(L, 3)})`);
      const compiled = parseTemplate(text);
      if (typeof compiled === 'string') {
        logError(compiled);
        return fail(L, 2, TEMPLATE_ERROR);
      }
      parts = compiled;
    }
    const s = new Subject(subject, c.utf8, c.utf8Check);
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
        const top = api.lua_gettop(L);
        api.lua_pushvalue(L, 3);
        pushCaptures(L, c, s, m);
        api.lua_callk(L, 1, -1, 0, 0); // all results: none at all is an error, as tostring() says
        if (api.lua_gettop(L) === top) throw new LuaError("bad argument #1 to 'tostring' (value expected)");
        api.lua_settop(L, top + 1);
        result += bridge.toString(L, -1) ?? luaToString(L);
        api.lua_settop(L, top);
      }
      count++;
      copied = s.byteOffset(end);
      if (!global) break;
      pos = s.next(start, end);
      if (pos > s.bytes.length) break;
    }
    bridge.pushString(L, result + subject.slice(copied));
    bridge.pushInteger(L, count);
    return 2;
  };

  const functions: Record<string, HostFunction> = {
    match: refusing(1, (L) => {
      const { subject, pattern, options } = args(L, 'match');
      const c = compileOr(pattern, options);
      if (typeof c === 'string') return fail(L, 1, c);
      const s = new Subject(subject, c.utf8, c.utf8Check);
      const m = exec(c, s, ctxPos(L, 4));
      if (!m) { bridge.pushNil(L); return 1; }
      setCtxPos(L, 4, s.byteOffset(matchEnd(m).end));
      // the 5th argument, res_table, is filled and returned instead of a new table
      pushCaptures(L, c, s, m, api.lua_type(L, 5) === T.TABLE ? 5 : 0);
      return 1;
    }),
    find: refusing(2, (L) => {
      const { subject, pattern, options } = args(L, 'find');
      const c = compileOr(pattern, options);
      if (typeof c === 'string') return fail(L, 2, c);
      const nth = bridge.toInteger(L, 5) ?? 0;
      if (nth > c.pattern.captures) return fail(L, 2, 'nth out of bound');
      const s = new Subject(subject, c.utf8, c.utf8Check);
      const m = exec(c, s, ctxPos(L, 4), nth > 0);
      if (!m) { bridge.pushNil(L); return 1; }
      setCtxPos(L, 4, s.byteOffset(matchEnd(m).end));
      const span = nth > 0 ? m.indices?.groups?.[`_${nth}`] : [m.index, m.index + m[0].length];
      if (!span) { bridge.pushNil(L); return 1; }
      bridge.pushInteger(L, s.byteOffset(span[0]) + 1);
      bridge.pushInteger(L, s.byteOffset(span[1]));
      return 2;
    }),
    sub: refusing(2, (L) => replace(L, false)),
    gsub: refusing(2, (L) => replace(L, true)),
  };
  // gmatch's iterator is a Lua closure over these two (a host function per call would leak ids)
  const gmatchHelpers: Record<string, HostFunction> = {
    check(L) {
      const c = compileOr(bridge.toString(L, 1) ?? '', bridge.toString(L, 2) ?? '');
      if (typeof c === 'string') return fail(L, 1, c);
      bridge.pushBoolean(L, true);
      return 1;
    },
    step: refusing(1, (L) => {
      const { subject, pattern, options } = args(L, 'gmatch');
      const c = compile(pattern, options);
      const s = new Subject(subject, c.utf8, c.utf8Check);
      bridge.getField(L, 4, 'pos');
      const pos = bridge.toInteger(L, -1) ?? 0;
      api.lua_settop(L, 4);
      const m = exec(c, s, pos);
      if (!m) return 0;
      const { start, end } = matchEnd(m);
      bridge.pushInteger(L, s.next(start, end));
      bridge.setField(L, 4, 'pos');
      pushCaptures(L, c, s, m);
      return 1;
    }),
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
    local m, err = step(subject, regex, options, state)
    if m then return m end
    state.pos = nil
    if err then return nil, err end
    return nil
  end
end`;
