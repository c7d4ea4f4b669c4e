// ngx.re as a hook sees it, on Gatehouse and Debian's nginx + libnginx-mod-http-lua 0.10.23 (PCRE 8,
// lua-resty-core 0.1.25): the D and J options, escapes PCRE takes as letters or refuses, the UTF-8
// check of the u option, match's res_table, what a replacement function may return, and how a
// bad escape in a Lua string literal is reported.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { logged, luaPair, same, sameLog } from './hooks-kit.ts';

/** Text as a client's body reads here (bytes as latin1). */
const bytes = (text: string) => Buffer.from(text).toString('latin1');

/** A Lua helper: `show(label, ...)` says the label and each value (tables as {0th value}). */
const SHOW = 'local function show(label, ...) local t = {} for i = 1, select("#", ...) do local v = select(i, ...) '
  + 't[#t + 1] = type(v) == "table" and "{" .. tostring(v[0]) .. "}" or tostring(v) end ngx.say(label, ": ", table.concat(t, " ")) end';

/** sub templates that do not compile, each for a reason of its own. */
const TEMPLATES = ['[$hello]', '[$' + '{hello}]', '[$' + '{12]', '[$' + '{1a}]', '[$' + '{}]', '$-', 'a$', '$$$'];

const pair = await luaPair({ after }, String.raw`
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /dupnames {
            content_by_lua_block {
                ${SHOW}
                local m = ngx.re.match("ab", [[(?<n>a)(?<n>b)(?<o>c)?]], "D")
                show("D", m.n[1], m.n[2], #m.n, m.o, m[3])
                m = ngx.re.match("b", [[(?<n>a)|(?<n>b)]], "D")
                show("D alternatives", #m.n, m.n[1])
                m = ngx.re.match("a", [[(?J)(?<n>a)|(?<n>b)]])
                show("(?J) takes the last group", m.n)
                show("no D", ngx.re.match("ab", [[(?<n>a)(?<n>b)]]))
                show("no D, find", ngx.re.find("ab", [[(?<n>a)(?'n'b)]]))
            }
        }
        location /escapes {
            content_by_lua_block {
                ${SHOW}
                for _, e in ipairs({ "Y", "i", "M", "q", "O", "%" }) do
                    show("\\" .. e, ngx.re.match("a" .. e .. "b", "a\\" .. e .. "b"))
                end
                show("stray \\E", ngx.re.match("ab", [[a\Eb]]))
                show("\\L", ngx.re.match("a", [[ab\Lc]]))
                show("\\N{}", ngx.re.match("a", [[ab\N{x}]]))
                show("\\u", ngx.re.match("a", [[\u0061]]))
                show("J \\u", ngx.re.match("xa", [[\u0061]], "J"))
                show("J lone \\u", ngx.re.match("au", [[a\u]], "J"))
                show("J \\u too large", ngx.re.match("a", [[a\u7AE0]], "J"))
                show("J \\u in u mode", ngx.re.match("a章", [[a\u7AE0]], "Ju"))
            }
        }
        location /utf8 {
            content_by_lua_block {
                ${SHOW}
                local bad = string.sub("你好", 1, 4)
                show("match", ngx.re.match(bad, "你", "u"))
                show("find", ngx.re.find(bad, "z", "u"))
                show("gsub", ngx.re.gsub(bad, "z", "", "u"))
                show("gmatch", ngx.re.gmatch(bad, "z", "u")())
                show("U checks nothing", ngx.re.match(bad, "你", "U"))
                show("start inside a character", ngx.re.find("日本", "本", "u", { pos = 2 }))
                show("empty matches step by a byte", ngx.re.gsub("日本", "", "-", "u"))
                show("valid", ngx.re.find("日本", "本", "u"))
                local it = ngx.re.gmatch("日本", "本", "u")
                show("gmatch", it())
                show("gmatch exhausted", select("#", it()))
            }
        }
        location /res-table {
            content_by_lua_block {
                ${SHOW}
                local res = { 9, 9, 9, x = 1 }
                local m = ngx.re.match("ab", "(a)", "", nil, res)
                show("filled", m == res, res[0], res[1], res[2], res[3], res.x)
                m = ngx.re.match("ab", "(?<x>a)(c)?", "", nil, res)
                show("again", m == res, res[1], res[2], res[3], res.x)
                m = ngx.re.match("ab", "(z)", "", nil, res)
                show("no match leaves it", m, res[0])
            }
        }
        location /sub-function {
            content_by_lua_block {
                ${SHOW}
                show("number", ngx.re.sub("abc", "b", function() return 1.5 end))
                show("nil", ngx.re.sub("abc", "b", function() return nil end))
                local ok, err = pcall(ngx.re.sub, "abc", "b", function() end)
                show("nothing", ok, (err:gsub("^.*: bad", "bad")))
                show("boolean", ngx.re.gsub("abcb", "b", function() return false end))
            }
        }
        location /template {
            content_by_lua_block {
                for _, t in ipairs({ ${TEMPLATES.map((t) => `"${t}"`).join(', ')} }) do
                    ngx.say(t, " ", select(3, ngx.re.sub("hello", "l+", t)))
                end
            }
        }
        location /bad-escape-inline {
            content_by_lua_block {
                local m = ngx.re.match("hello, 1234", "(\d+)")
            }
        }
        location /bad-escape-file { content_by_lua_file html/bad-escape.lua; }
    }
`, {
  'html/bad-escape.lua': 'local m = ngx.re.match("hello, 1234", "(\\\\\\s+)")\n',
});

test('D: each name is a table of what its groups matched; duplicate names need D or (?J)', async () => {
  assert.equal((await same(pair, '/dupnames')).body, [
    'D: a b 2 nil false',
    'D alternatives: 1 b',
    '(?J) takes the last group: false',
    'no D: nil pcre_compile() failed: two named subpatterns have the same name in "(?<n>a)(?<n>b)" at ">b)"',
    'no D, find: nil nil pcre_compile() failed: two named subpatterns have the same name in "(?<n>a)(?\'n\'b)" at "\'b)"',
    '',
  ].join('\n'));
});

test('escapes: an unknown letter is itself, \\E alone nothing, \\L \\N{} \\u refused; J reads \\uHHHH', async () => {
  const perlOnly = 'pcre_compile() failed: PCRE does not support \\L, \\l, \\N{name}, \\U, or \\u in';
  assert.equal((await same(pair, '/escapes')).body, [
    '\\Y: {aYb}', '\\i: {aib}', '\\M: {aMb}', '\\q: {aqb}', '\\O: {aOb}', '\\%: {a%b}',
    'stray \\E: {ab}',
    `\\L: nil ${perlOnly} "ab\\Lc" at "Lc"`,
    `\\N{}: nil ${perlOnly} "ab\\N{x}" at "N{x}"`,
    `\\u: nil ${perlOnly} "\\u0061" at "u0061"`,
    'J \\u: {a}',
    'J lone \\u: {au}',
    'J \\u too large: nil pcre_compile() failed: character value in \\u.... sequence is too large in "a\\u7AE0" at "0"',
    bytes('J \\u in u mode: {a章}'),
    '',
  ].join('\n'));
});

test('u checks the subject is UTF-8 and that a search starts on a character; U does not', async () => {
  assert.equal((await same(pair, '/utf8')).body, [
    'match: nil pcre_exec() failed: -10',
    'find: nil nil pcre_exec() failed: -10',
    'gsub: nil nil pcre_exec() failed: -10',
    'gmatch: nil pcre_exec() failed: -10',
    bytes('U checks nothing: {你}'),
    'start inside a character: nil nil pcre_exec() failed: -11',
    'empty matches step by a byte: nil nil pcre_exec() failed: -11',
    'valid: 4 6',
    bytes('gmatch: {本}'),
    'gmatch exhausted: 1',
    '',
  ].join('\n'));
});

test('match fills and returns its 5th argument, leaving its other keys', async () => {
  assert.equal((await same(pair, '/res-table')).body, [
    'filled: true a a 9 9 1',
    'again: true a false 9 a',
    'no match leaves it: nil a',
    '',
  ].join('\n'));
});

test('a replacement function\'s result goes through tostring', async () => {
  assert.equal((await same(pair, '/sub-function')).body, [
    'number: a1.5c 1', 'nil: anilc 1', 'nothing: false bad argument #1 to \'tostring\' (value expected)', 'boolean: afalsecfalse 2', '',
  ].join('\n'));
});

test('a template that does not compile: the call fails, the reason goes to error.log with no request', async () => {
  assert.equal((await same(pair, '/template')).body, TEMPLATES.map((t) => `${t} failed to compile the replacement template\n`).join(''));
  await logged(pair.gh, /found in "\$\$\$"/);
  if (pair.ng) await logged(pair.ng, /found in "\$\$\$"/);
  assert.deepEqual(await sameLog(pair, /capturing variable|closing bracket/), [
    '[error] attempt to use named capturing variable "hello" (named captures not supported yet)',
    '[error] attempt to use named capturing variable "hello" (named captures not supported yet)',
    '[error] the closing bracket in "12" variable is missing',
    '[error] the closing bracket in "1" variable is missing',
    '[error] lua script: invalid capturing variable name found in "[$' + '{}]"',
    '[error] lua script: invalid capturing variable name found in "$-"',
    '[error] lua script: invalid capturing variable name found in "a$"',
    '[error] lua script: invalid capturing variable name found in "$$$"',
  ]);
});

test('a bad escape in a string literal: LuaJIT\'s words, the string quoted up to the backslash', async () => {
  assert.equal((await same(pair, '/bad-escape-inline')).status, 500);
  assert.equal((await same(pair, '/bad-escape-file')).status, 500);
  const badEscape = /invalid escape sequence/;
  const withoutPrefix = (lines: string[]) => lines.map((l) => l.replace(/\/tmp\/gh-test-\w+\//g, 'PREFIX/').replace(/, client: .*/, '').replace(/nginx\.conf:\d+/, 'nginx.conf:N'));
  const lines = async (srv: typeof pair.gh) => {
    await logged(srv, /bad-escape\.lua:1: invalid escape/);
    return withoutPrefix(await logged(srv, badEscape));
  };
  const gh = await lines(pair.gh);
  assert.deepEqual(gh, [
    '[error] failed to load inlined Lua code: content_by_lua(nginx.conf:N):2: invalid escape sequence near \'"(\'',
    '[error] failed to load external Lua file "PREFIX/html/bad-escape.lua": PREFIX/html/bad-escape.lua:1: invalid escape sequence near \'"(\\\'',
  ]);
  if (pair.ng) assert.deepEqual(gh, await lines(pair.ng));
});
