/**
 * SSI commands in a static page: echo (encodings, defaults), set with
 * variables and escapes, config (errmsg, timefmt), if/elif/else with string
 * and regex comparisons and captures, block with stub, the headers the
 * filter changes, and nginx's error text and log lines for bad commands.
 * Each answer is compared with Debian's nginx 1.22 (the reference) and
 * checked against the expected text.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ask, errorLines, same, startPair } from './ssi-kit.ts';
import type { Pair } from './ssi-kit.ts';
import type { TestContext } from 'node:test';

const conf = `
events {}
http {
    server_tokens off;
    access_log off;
    types { text/html html; text/plain txt; }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        location / { ssi on; }
        location /silent/ { ssi on; ssi_silent_errors on; }
        location /short/ { ssi on; ssi_value_length 8; }
        location /lm/ { ssi on; ssi_last_modified on; }
        location /types/ { ssi on; ssi_types text/plain; }
        location /off/ { }
        location /var/ { ssi on; set $fromconf "conf value"; }
    }
}
`;

const ERR = '[an error occurred while processing the directive]';

const files: Record<string, string> = {
  'html/echo.html': 'A<!--#echo var="arg_a" -->B<!--#echo var="arg_none" default="dflt" -->C<!--#echo var="nothing" -->'
    + 'D<!--#echo var="ARG_A" -->E<!--#echo var="arg_empty" default="unused" -->F',
  'html/encode.html': '<!--#set var="v" value="<a href=\\"x\\">&amp; 100%</a>" -->'
    + '1<!--#echo var="v" -->2<!--#echo var="v" encoding="url" -->3<!--#echo var="v" -->'
    + '4<!--#echo var="v" encoding="none" -->5<!--#echo var="v" encoding="bogus" -->6<!--#echo var="v" encoding="entity" -->',
  'html/set.html': '<!--#set var="x" value="$uri|${arg_a}|\\$arg_a|a\\\\b|\\q|$nope|${arg_a}z" -->[<!--#echo var="x" encoding="none" -->]'
    + '<!--#set var="Y" value="first" --><!--#set var="y" value="second" -->[<!--#echo var="y" -->]',
  'html/config.html': '<!--#config errmsg="OOPS" --><!--#bogus -->|<!--#config timefmt="%Y|%%|%j" --><!--#echo var="date_gmt" -->'
    + '|<!--#config timefmt="%s" --><!--#echo var="date_local" -->',
  'html/if.html': '<!--#if expr="$arg_a" -->A<!--#elif expr="$arg_b = yes" -->B<!--#elif expr="$arg_c != /^n[o]+$/" -->C'
    + '<!--#else -->ELSE<!--#endif -->|<!--#if expr="$arg_r = /(\\d+)-(?P<word>[a-z]+)/" --><!--#echo var="1" -->,<!--#echo var="word" -->,<!--#echo var="0" --><!--#endif -->'
    + '|<!--#if expr="$ARG_A = \\/x" -->slash<!--#endif -->|<!--#if expr="text = text" -->T<!--#endif -->'
    + '|<!--#if expr="$arg_a" -->in<!--#if expr="1" -->nested<!--#endif -->out',
  'html/block.html': '<!--#block name="one" -->stub <!--#echo var="arg_a" --> text<!--#endblock -->'
    + '[<!--#include virtual="/missing.html?$args" stub="one" -->]'
    + '[<!--#include virtual="/empty.html" stub="one" -->][<!--#include virtual="/missing.html" stub="none" -->]',
  'html/empty.html': '',
  'html/errors.html': 'a<!--#unknown -->b<!--#echo -->c<!--#echo var="a" var="b" -->d<!--#echo bad="1" -->e'
    + '<!--#if expr="$a ~ b" -->f<!--#endif -->g<!--#else -->h<!--#echo var="x" - -->i<!--#echo var=x -->j'
    + '<!--#include -->k<!--#include virtual="/a" file="/b" -->l<!--#include virtual="/a" wait="maybe" -->m'
    + '<!--#include virtual="/a" set="x" stub="y" -->n<!--#include file="/a" wait="yes" -->o<!--#include virtual="/../x" -->p'
    + '<!--#commandthatiswaytoolongforssi1234 -->q<!--#set var="v" value="${arg_a" -->r<!--#set var="v" value="$" -->s',
  'html/silent/errors.html': 'a<!--#unknown -->b<!--#echo -->c',
  'html/short/value.html': 'a<!--#echo var="123456789" -->b<!--#echo var="12345678" -->c',
  'html/comments.html': 'x<!-- plain --><!-x<!--<!--#echo var="arg_a" --><!--#--><<!--#echo var="arg_a" -->>< !--#echo -->'
    + '<!--#\techo\nvar=\'arg_a\'\r-->end<!--#echo var="arg_a"',
  'html/lm/page.html': 'lm<!--#echo var="arg_a" -->',
  'html/types/page.txt': 'txt<!--#echo var="arg_a" -->',
  'html/page.txt': 'txt<!--#echo var="arg_a" -->',
  'html/off/page.html': 'off<!--#echo var="arg_a" -->',
  'html/var/page.html': '[<!--#echo var="fromconf" -->][<!--#echo var="host" -->][<!--#echo var="request_uri" -->][<!--#echo var="http_x_test" -->]',
};

async function pair(t: TestContext): Promise<Pair> {
  return startPair(t, { conf, files });
}

test('echo: values, defaults, (none), names in any case', async (t) => {
  const p = await pair(t);
  const r = await same(t, p, '/echo.html?a=val&empty=');
  assert.equal(r.body.toString(), 'AvalBdfltC(none)DvalEF');
});

test('echo encodings: entity by default, url and none, and the choice sticks', async (t) => {
  const p = await pair(t);
  const r = await same(t, p, '/encode.html');
  const v = '<a href="x">&amp; 100%</a>';
  const ent = '&lt;a href=&quot;x&quot;&gt;&amp;amp; 100%&lt;/a&gt;';
  const url = '%3Ca%20href=%22x%22%3E&amp;%20100%25%3C/a%3E';
  assert.equal(r.body.toString(), `1${ent}2${url}3${url}4${v}5${v}6${ent}`);
  assert.equal(errorLines(p.gh, /unknown encoding "bogus" in the "echo" command/).length, 1);
});

test('set: variables, ${name}, escapes; names are lowercased', async (t) => {
  const p = await pair(t);
  const r = await same(t, p, '/set.html?a=AA');
  assert.equal(r.body.toString(), '[/set.html|AA|$arg_a|a\\b|\\q||AAz][second]');
});

test('config errmsg and timefmt ($date_gmt, $date_local)', async (t) => {
  const p = await pair(t);
  const r = await ask(p.gh, '/config.html');
  const now = new Date();
  const m = /^OOPS\|(\d{4})\|%\|(\d{3})\|(\d+)$/.exec(r.body.toString());
  assert.ok(m, r.body.toString());
  assert.equal(Number(m[1]), now.getUTCFullYear());
  assert.ok(Math.abs(Number(m[3]) - Date.now() / 1000) < 60);
  if (p.ng) {
    const ref = await ask(p.ng, '/config.html');
    assert.equal(ref.body.toString().replace(/\d+$/, ''), r.body.toString().replace(/\d+$/, ''));
  }
});

test('if / elif / else, regex captures and named captures', async (t) => {
  const p = await pair(t);
  assert.equal((await same(t, p, '/if.html?a=1&r=x12-abc')).body.toString(), `A|12,abc,12-abc||T|in${ERR}nestedout`);
  assert.equal((await same(t, p, '/if.html?a=/x')).body.toString(), `A||slash|T|in${ERR}nestedout`);
  assert.equal((await same(t, p, '/if.html?b=yes')).body.toString(), 'B|||T|out');
  // a `$` at the end of the regex is a variable without a name: an error
  assert.equal((await same(t, p, '/if.html?c=nooo')).body.toString(), `${ERR}ELSE|||T|out`);
  assert.equal((await same(t, p, '/if.html?c=yes')).body.toString(), `${ERR}ELSE|||T|out`);
  // an `if` inside `if` is an error nginx reports (no nesting)
  assert.equal(errorLines(p.gh, /the "if" command inside the "if" command/).length, 2);
});

test('block and stub: used for an error and for an empty response', async (t) => {
  const p = await pair(t);
  const r = await same(t, p, '/block.html?a=X');
  // an empty file is not parsed, so neither is the stub that takes its place
  assert.equal(r.body.toString(), `[stub X text][stub <!--#echo var="arg_a" --> text][${ERR}]`);
  assert.equal(errorLines(p.gh, /"stub"="none" for "include" not found/).length, 1);
});

test('bad commands: nginx error text in the page and its log lines', async (t) => {
  const p = await pair(t);
  const r = await same(t, p, '/errors.html?a=1');
  const body = r.body.toString();
  assert.equal(body.split(ERR).length - 1, 18, body);
  assert.ok(body.startsWith(`a${ERR}b${ERR}c${ERR}d${ERR}e${ERR}f`));
  for (const line of [
    'invalid SSI command: "unknown"',
    'mandatory "var" parameter is absent in "echo" SSI command',
    'duplicate "var" parameter in "echo" SSI command',
    'invalid parameter name: "bad" in "echo" SSI command',
    'invalid expression in "$a ~ b"',
    'invalid context of SSI command: "else"',
    'unexpected " " symbol in "echo" SSI command',
    'unexpected "x" symbol before value of "var" parameter in "echo" SSI command',
    'no parameter in "include" SSI command',
    'inclusion may be either virtual="/a" or file="/b"',
    'invalid value "maybe" in the "wait" parameter',
    '"set" and "stub" cannot be used together in "include" SSI command',
    '"wait" cannot be used with file="/a"',
    'unsafe URI "/../x" was detected',
    'the "commandthatiswaytoolongforssi1234..." SSI command is too long',
    'the closing bracket in "arg_a" variable is missing',
    'invalid variable name in "$"',
  ]) {
    assert.equal(errorLines(p.gh, new RegExp(`\\[error\\].*${line.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, client: 127\\.0\\.0\\.1`)).length, 1, line);
  }
});

test('ssi_silent_errors and ssi_value_length', async (t) => {
  const p = await pair(t);
  assert.equal((await same(t, p, '/silent/errors.html')).body.toString(), 'abc');
  assert.equal((await same(t, p, '/short/value.html')).body.toString(), `a${ERR}b(none)c`);
  assert.equal(errorLines(p.gh, /too long "123456789\.\.\." value of "var" parameter in "echo" SSI command/).length, 1);
});

test('comments, stray "<", whitespace in commands, an unfinished command at the end', async (t) => {
  const p = await pair(t);
  const r = await same(t, p, '/comments.html?a=V');
  // `<!--#-->` is an error that lasts until the next "-->"
  assert.equal(r.body.toString(), `x<!-- plain --><!-x<!--V${ERR}>< !--#echo -->Vend`);
});

test('headers: length, ranges, Last-Modified and ETag go; ssi_last_modified keeps them (weak ETag)', async (t) => {
  const p = await pair(t);
  const r = await same(t, p, '/echo.html');
  assert.equal(r.header('transfer-encoding'), 'chunked');
  for (const h of ['content-length', 'last-modified', 'etag', 'accept-ranges']) assert.equal(r.header(h), undefined, h);
  const lm = await ask(p.gh, '/lm/page.html?a=1');
  assert.equal(lm.body.toString(), 'lm1');
  assert.ok(lm.header('last-modified'));
  assert.match(lm.header('etag') ?? '', /^W\/"/);
  // HTTP/1.0: no length, so the connection closes after the body
  const old = await same(t, p, 'GET /echo.html HTTP/1.0');
  assert.equal(old.header('connection'), 'close');
  // HEAD: the head only
  const head = await same(t, p, 'HEAD /echo.html HTTP/1.1');
  assert.equal(head.body.length, 0);
  // the file's date still answers a conditional request (not_modified runs before SSI), as in nginx
  const ims = await same(t, p, 'GET /echo.html HTTP/1.1\r\nHost: localhost\r\nIf-Modified-Since: Mon, 06 May 2024 07:08:09 GMT\r\nConnection: close\r\n\r\n');
  assert.equal(ims.status, 304);
  // a range request gets the whole page
  const range = await same(t, p, 'GET /echo.html?a=v HTTP/1.1\r\nHost: localhost\r\nRange: bytes=0-1\r\nConnection: close\r\n\r\n');
  assert.equal(range.status, 200);
});

test('ssi_types, ssi off, and variables of the request', async (t) => {
  const p = await pair(t);
  assert.equal((await same(t, p, '/types/page.txt?a=1')).body.toString(), 'txt1');
  assert.equal((await same(t, p, '/page.txt?a=1')).body.toString(), 'txt<!--#echo var="arg_a" -->');
  assert.equal((await same(t, p, '/off/page.html?a=1')).body.toString(), 'off<!--#echo var="arg_a" -->');
  const r = await same(t, p, 'GET /var/page.html?q HTTP/1.1\r\nHost: localhost\r\nX-Test: hdr\r\nConnection: close\r\n\r\n');
  assert.equal(r.body.toString(), '[conf value][localhost][/var/page.html?q][hdr]');
});
