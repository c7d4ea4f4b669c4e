// ngx.re (src/lua/re.ts, pcre.ts): PCRE semantics on bytes through JavaScript RegExp. The expected
// results were produced by Debian's nginx 1.22 + libnginx-mod-http-lua 0.10.23 (PCRE 8) running the
// same calls in content_by_lua_block: inline options, anchors, possessive and atomic groups, \h,
// POSIX classes, \Q..\E, (?P<name>), the x flag, octal and \x{} escapes, UTF-8 mode.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { regexTable } from '../../src/lua/re.ts';
import { LuaVm } from '../../src/lua/vm.ts';

const vm = await LuaVm.create({ print: () => {} });
const { bridge } = vm;
bridge.api.lua_createtable(bridge.L, 0, 1);
regexTable(bridge)(bridge.L);
bridge.setField(bridge.L, -2, 're');
bridge.setGlobal(bridge.L, 'ngx');
vm.eval(`
  local function fmt(v)
    if type(v) ~= "table" then return tostring(v) end
    local t = {}
    for i = 0, 9 do if v[i] == nil then break end t[#t + 1] = tostring(v[i]) end
    for k, x in pairs(v) do if type(k) == "string" then t[#t + 1] = k .. "=" .. tostring(x) end end
    table.sort(t)
    return "{" .. table.concat(t, ",") .. "}"
  end
  function case(s, p, o)
    local ok, m, err = pcall(ngx.re.match, s, p, o)
    local e = err and (err:match("^pcre_compile") and "compile-error" or err) or ""
    return (ok and fmt(m) or "raised") .. " " .. e
  end`);

/** [Lua arguments of ngx.re.match, what OpenResty gave] */
const MATCHES: Array<[string, string]> = [
  ["\"FooBar\", \"(?i)foobar\"", "{FooBar} "],
  ["\"xFOO\", \"x(?i)foo\"", "{xFOO} "],
  ["\"ab\\nab\", \"(?m)^ab$\"", "{ab} "],
  ["\"a\\nb\", \"a.b\", \"s\"", "{a\nb} "],
  ["\"a\\nb\", \"(?s)a.b\"", "{a\nb} "],
  ["\"a\\rb\", \"a.b\"", "{a\rb} "],
  ["\"foo\\n\", \"foo$\"", "{foo} "],
  ["\"foo\\n\", \"foo\\\\z\"", "nil "],
  ["\"foo\\n\", \"foo\\\\Z\"", "{foo} "],
  ["\"xfoo\", \"\\\\Afoo\"", "nil "],
  ["\"aaa\", \"a++a\"", "nil "],
  ["\"aaab\", \"a*+b\"", "{aaab} "],
  ["\"abc\", \"(?>a|ab)c\"", "nil "],
  ["\"a\\160b\", \"a\\\\sb\"", "nil "],
  ["\"a\\160b\", \"a\\\\hb\"", "{a\u00a0b} "],
  ["\"a b\", \"a\\\\hb\"", "{a b} "],
  ["\"a1\", \"[[:alpha:]][[:digit:]]\"", "{a1} "],
  ["\"a.b*c\", \"\\\\Qa.b*\\\\E\"", "{a.b*} "],
  ["\"abab\", \"(?P<x>ab)(?P=x)\"", "{ab,abab,x=ab} "],
  ["\"abab\", \"(?<x>ab)\\\\k<x>\"", "{ab,abab,x=ab} "],
  ["\"abab\", \"(ab)\\\\g{-1}\"", "{ab,abab} "],
  ["\"abab\", \"(ab)\\\\g1\"", "{ab,abab} "],
  ["\"a{b\", \"a{b\"", "{a{b} "],
  ["\"a{1}\", \"a\\\\{1}\"", "{a{1}} "],
  ["\"ab c\", \"a b c\", \"x\"", "nil "],
  ["\"abc\", \"a b # comment\\n c\", \"x\"", "{abc} "],
  ["\"\\1\", \"\\\\x01\"", "{\u0001} "],
  ["\"\\1\", \"\\\\x{1}\"", "{\u0001} "],
  ["\"\\1\", \"\\\\01\"", "{\u0001} "],
  ["\"A\", \"\\\\101\"", "{A} "],
  ["\"\\27\", \"\\\\e\"", "{\u001b} "],
  ["\"x]y\", \"[]x]+\"", "{x]} "],
  ["\"a-b\", \"[a\\\\-b]+\"", "{a-b} "],
  ["\"a\\nb\", \"a\\\\Rb\"", "{a\nb} "],
  ["\"a\\r\\nb\", \"a\\\\Rb\"", "{a\r\nb} "],
  ["\"aB\", \"a(?-i)B\", \"i\"", "{aB} "],
  ["\"ab\", \"a(?i:B)\"", "{ab} "],
  ["\"Ab\", \"(?i)a|b\"", "{A} "],
  ["\"B\", \"a(?i)b|c\"", "nil "],
  ["\"C\", \"a(?i)b|c\"", "{C} "],
  ["\"\\195\\169\", \".\", \"u\"", "{\u00c3\u00a9} "],
  ["\"\\195\\169t\", \"(.)t\", \"u\"", "{\u00c3\u00a9,\u00c3\u00a9t} "],
  ["\"abc\", \"(?#comment)b\"", "{b} "],
  ["\"a\\tb\", \"a\\\\Hb\"", "nil "],
  ["\"aXb\", \"a\\\\Nb\"", "{aXb} "],
  ["\"abcabc\", \"(?:abc){2}\"", "{abcabc} "],
  ["\"aaa\", \"a{2,}?\"", "{aa} "],
  ["\"x\", \"a**\"", "nil compile-error"],
  ["\"x\", \"a{2,1}\"", "nil compile-error"],
  ["\"word\", \"\\\\bwo\"", "{wo} "],
  ["\"\\255\\254\", \"[\\\\x{fe}-\\\\x{ff}]+\"", "{\u00ff\u00fe} "],
  ["\"tab\\there\", \"\\\\t\"", "{\t} "],
  ["\"hello\", \"l+\", \"o\"", "{ll} "],
  ["\"hello\", \"l+\", \"jo\"", "{ll} "],
  ["\"HELLO\", \"l+\", \"i\"", "{LL} "],
  ["\"a.b\", \"a\\\\.b\"", "{a.b} "],
  ["\"a/b\", \"a\\\\/b\"", "{a/b} "],
  ["\"a:b\", \"a\\\\:b\"", "{a:b} "],
  ["\"a|b\", \"a\\\\|b\"", "{a|b} "],
];

test('ngx.re.match gives what OpenResty gives for PCRE constructs JavaScript lacks', () => {
  for (const [args, expected] of MATCHES) assert.equal(vm.eval(`return case(${args})`)[0], expected, args);
});

test('find, gmatch, sub, gsub, ctx.pos and errors as OpenResty returns them', () => {
  const e = (code: string) => vm.eval(code);
  assert.deepEqual(e('return ngx.re.gsub("aaa", "a*", "X")'), ['XX', 2]);
  assert.deepEqual(e('return ngx.re.gsub("abc", "", "-")'), ['-a-b-c-', 4]);
  assert.deepEqual(e('return ngx.re.gsub("a\\0b", "\\\\x00", "0")'), ['a0b', 1]);
  assert.deepEqual(e('return ngx.re.gsub("hello world", "(o)", "[$1]")'), ['hell[o] w[o]rld', 2]);
  assert.deepEqual(e('return ngx.re.gsub("hello world", "o", function(m) return m[0]:upper() end)'), ['hellO wOrld', 2]);
  assert.deepEqual(e('return ngx.re.sub("abc", "b", "${0}$$")'), ['ab$c', 1]);
  assert.deepEqual(e('return ngx.re.sub("abc", "b", "$x")'), [undefined, undefined, 'failed to compile the replacement template']);
  assert.deepEqual(e('return ngx.re.sub("abc", "(?<n>b)", "${n}")'), [undefined, undefined, 'failed to compile the replacement template']);
  assert.deepEqual(e('return ngx.re.find("hello world", "(o) (w)", "", nil, 2)'), [7, 7]);
  assert.deepEqual(e('return ngx.re.find("abc", "b", "", nil, 1)'), [undefined, undefined, 'nth out of bound']);
  assert.deepEqual(e('return ngx.re.find("\\xc3\\xa9t\\xc3\\xa9", "t", "u")'), [3, 3]);
  assert.deepEqual(e('local ctx = {pos = 3} local m = ngx.re.match("a1b2c3", "[a-z]", "", ctx) return m[0], ctx.pos'), ['b', 4]);
  assert.deepEqual(e('local m = ngx.re.match("hello", "(?<first>h)(?<x>z)?") return m.first, m.x, m[2]'), ['h', false, false]);
  assert.deepEqual(e('return ngx.re.match("x", "(abc")'), [undefined, 'pcre_compile() failed: missing ) in "(abc"']);
  assert.deepEqual(e('local t = {} for m in ngx.re.gmatch("aaa", "a*") do t[#t+1] = "[" .. m[0] .. "]" end return table.concat(t)'), ['[aaa][]']);
  assert.deepEqual(e('local t = {} for m in ngx.re.gmatch("abc", "") do t[#t+1] = "[" .. m[0] .. "]" end return table.concat(t)'), ['[][][][]']);
  assert.deepEqual(e('local t = {} for m in ngx.re.gmatch("a1b2c3", "[a-z](\\\\d)") do t[#t+1] = m[1] end return table.concat(t, ",")'), ['1,2,3']);
  // \G at the start: the match begins where the search does (ctx.pos, the previous match's end)
  assert.deepEqual(e('local ctx = {pos = 3} local from, to = ngx.re.find("1234, hello", [[(\\G[0-9]+)]], "", ctx) return from, to, ctx.pos'), [3, 4, 5]);
  assert.deepEqual(e('local ctx = {pos = 5} return ngx.re.find("1234, hello", [[\\G[0-9]+]], "", ctx)'), [undefined]);
  assert.deepEqual(e('local t = {} for m in ngx.re.gmatch("aab", [[\\Ga]]) do t[#t+1] = m[0] end return #t'), [2]);
  assert.deepEqual(e('return ngx.re.gsub("aaba", [[\\Ga]], "x")'), ['xxba', 2]);
  const [ok, message] = e('return pcall(ngx.re.match, "abc", "b", "Q")');
  assert.equal(ok, false);
  assert.match(message as string, /unknown flag "Q" \(flags "Q"\)$/);
});

test('constructs with no JavaScript translation are refused with a clear error, never misread', () => {
  for (const [pattern, what] of [['a\\\\Kb', '\\K'], ['a|\\\\Gb', '\\G'], ['(a)(?1)', 'recursion'], ['(?|(a)|(b))', 'branch reset'], ['(?(1)a|b)', 'conditional'], ['[[:^alpha:]]', 'negated POSIX'], ['\\\\p{L}', '\\p']]) {
    const [m, err] = vm.eval(`return ngx.re.match("ab", "${pattern}")`);
    assert.equal(m, undefined, pattern);
    assert.ok((err as string).startsWith('pcre_compile() failed: ') && (err as string).includes(what) && (err as string).includes('not supported'), `${pattern}: ${err}`);
  }
});
