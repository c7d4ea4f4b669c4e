/**
 * The charset filter: which responses get `; charset=`, what a response
 * that names its own charset keeps, and recoding with nginx's shipped maps
 * (Debian's /etc/nginx/koi-utf, koi-win, win-utf, read with `include`):
 * 8-bit to 8-bit, to utf-8 and from utf-8 (entities for characters the map
 * lacks, `?` for invalid utf-8), bodies larger than one buffer, ranges,
 * HEAD, proxied responses with override_charset and X-Accel-Charset.
 * Compared byte for byte with Debian's nginx 1.22 (the reference).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ask, logLines, same, startPair } from './static-kit.ts';
import { startGatehouse } from '../kit/server.ts';

const conf = `
events {}
http {
    server_tokens off;
    access_log off;
    types { text/html html; text/plain txt; text/foo foo; application/json json; }
    include /etc/nginx/koi-utf;
    include /etc/nginx/koi-win;
    include /etc/nginx/win-utf;
    charset_map B A { 58 59; }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        location /utf/ { charset utf-8; }
        location /types/ { charset utf-8; charset_types text/foo; }
        location /any/ { charset utf-8; charset_types *; }
        location /var/ { charset $arg_c; }
        location /varsrc/ { charset $arg_c; source_charset $arg_s; }
        location /ab/ { charset A; source_charset B; }
        location /koi2utf/ { charset utf-8; source_charset koi8-r; }
        location /utf2koi/ { charset koi8-r; source_charset utf-8; }
        location /koi2win/ { charset windows-1251; source_charset koi8-r; }
        location /win2koi/ { charset koi8-r; source_charset windows-1251; }
        location /win2utf/ { charset UTF-8; source_charset windows-1251; }
        location /ssi/ { ssi on; charset koi8-r; source_charset utf-8; }
        location /inc/ { source_charset windows-1251; }
        location /same/ { charset utf-8; source_charset UTF-8; }
        location /redirect/ { charset utf-8; return 302 /utf/a.html; }
        location /missing/ { charset utf-8; }
        location /param/ { types {} default_type "text/html; level=1"; charset utf-8; }
        location /if/ { if ($arg_x) { charset koi8-r; } }
        location /proxy/ { charset koi8-r; proxy_pass http://127.0.0.1:%%PORT_8081%%/; }
        location /override/ { charset koi8-r; override_charset on; proxy_pass http://127.0.0.1:%%PORT_8081%%/; }
        location /accel/ { proxy_pass http://127.0.0.1:%%PORT_8081%%/accel/; }
        location /accel-ignored/ { proxy_pass http://127.0.0.1:%%PORT_8081%%/accel/; proxy_ignore_headers X-Accel-Charset; }
        location /accel-unknown/ { proxy_pass http://127.0.0.1:%%PORT_8081%%/accel-unknown/; }
    }
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        server_name localhost;
        root %%PREFIX%%/html/utf;
        charset utf-8;
        location /accel/ { alias %%PREFIX%%/html/utf/; add_header X-Accel-Charset koi8-r; }
        location /accel-unknown/ { alias %%PREFIX%%/html/utf/; add_header X-Accel-Charset nonesuch; }
    }
}
`;

/** `text` in a single-byte charset, through Node's decoder of it (unknown characters: `?`). */
function encode(text: string, label: string): Buffer {
  const decoder = new TextDecoder(label);
  const byChar = new Map<string, number>();
  for (let b = 255; b >= 0; b--) byChar.set(decoder.decode(Uint8Array.of(b)), b);
  return Buffer.from([...text].map((c) => byChar.get(c) ?? 0x3f));
}

const russian = 'Съешь же ещё этих мягких французских булок, да выпей чаю. ЁЖИК ёжик № ';
const utf8Text = Buffer.concat([
  Buffer.from(`<p>${russian} € © ✓ 😀 ü</p>\n`),
  Buffer.from([0xff, 0xc3, 0x28, 0xe2, 0x82, 0x41, 0x0a]), // invalid utf-8
]);
const koiText = Buffer.concat([encode(`<p>${russian}</p>\n`, 'koi8-r'), Buffer.from(Array.from({ length: 128 }, (_, i) => 0x80 + i))]);
const winText = encode(`<p>${russian}</p>\n`, 'windows-1251');
// several buffers' worth, with characters cut at every possible place
const bigUtf8 = Buffer.from(Array.from({ length: 6000 }, (_, i) => `${i} ${russian}\n`).join(''));
const bigKoi = encode(Array.from({ length: 6000 }, (_, i) => `${i} ${russian}\n`).join(''), 'koi8-r');

const files: Record<string, string | Buffer> = {
  'html/utf/a.html': utf8Text, 'html/utf/a.txt': 'plain\n', 'html/utf/a.foo': 'foo\n', 'html/utf/a.json': '{}\n',
  'html/types/a.foo': 'foo\n', 'html/types/a.html': 'html\n', 'html/types/a.txt': 'text\n', 'html/any/a.json': '{}\n',
  'html/var/a.html': 'XXX\n', 'html/varsrc/a.html': 'XXX\n', 'html/ab/a.html': 'X'.repeat(99), 'html/if/a.html': 'if\n', 'html/param/a.html': 'param\n',
  'html/koi2utf/a.html': koiText, 'html/koi2utf/big.html': bigKoi,
  'html/utf2koi/a.html': utf8Text, 'html/utf2koi/big.html': bigUtf8,
  'html/koi2win/a.html': koiText, 'html/win2koi/a.html': winText, 'html/win2utf/a.html': winText,
  'html/same/a.html': utf8Text,
  'html/ssi/a.html': Buffer.concat([Buffer.from('<p>Ёж</p><!--# include virtual="/inc/a.html" -->'), utf8Text]),
  'html/inc/a.html': encode('<i>Привет</i>', 'windows-1251'), 'html/utf/big.html': bigUtf8,
};

test('charset and charset_types set the Content-Type as nginx does', async (t) => {
  const pair = await startPair(t, { conf, files });
  assert.equal((await same(t, pair, 'GET /utf/a.html HTTP/1.1')).header('content-type'), 'text/html; charset=utf-8');
  assert.equal((await same(t, pair, 'GET /utf/a.txt HTTP/1.1')).header('content-type'), 'text/plain; charset=utf-8');
  assert.equal((await same(t, pair, 'GET /utf/a.foo HTTP/1.1')).header('content-type'), 'text/foo');
  assert.equal((await same(t, pair, 'GET /utf/a.json HTTP/1.1')).header('content-type'), 'application/json');
  assert.equal((await same(t, pair, 'GET /types/a.foo HTTP/1.1')).header('content-type'), 'text/foo; charset=utf-8');
  assert.equal((await same(t, pair, 'GET /types/a.html HTTP/1.1')).header('content-type'), 'text/html; charset=utf-8', 'the defaults stay');
  assert.equal((await same(t, pair, 'GET /types/a.txt HTTP/1.1')).header('content-type'), 'text/plain', 'charset_types keeps only text/html of the defaults');
  assert.equal((await same(t, pair, 'GET /any/a.json HTTP/1.1')).header('content-type'), 'application/json; charset=utf-8');
  assert.equal((await same(t, pair, 'GET /var/a.html?c=koi8-r HTTP/1.1')).header('content-type'), 'text/html; charset=koi8-r');
  assert.equal((await same(t, pair, 'GET /missing/nothing.html HTTP/1.1')).header('content-type'), 'text/html; charset=utf-8', 'error pages too');
  assert.equal((await same(t, pair, 'GET /redirect/ HTTP/1.1')).header('content-type'), 'text/html', 'not on a 302');
  assert.equal((await same(t, pair, 'GET /param/a.html HTTP/1.1')).header('content-type'), 'text/html; level=1', 'a type with parameters is not text/html');
  assert.equal((await same(t, pair, 'GET /if/a.html HTTP/1.1')).header('content-type'), 'text/html');
  assert.equal((await same(t, pair, 'GET /if/a.html?x=1 HTTP/1.1')).header('content-type'), 'text/html; charset=koi8-r');
  const ab = await same(t, pair, 'GET /ab/a.html HTTP/1.1');
  assert.equal(ab.header('content-type'), 'text/html; charset=A');
  assert.equal(ab.body.toString(), 'Y'.repeat(99));
  assert.equal((await same(t, pair, 'GET /varsrc/a.html?c=A&s=b HTTP/1.1')).body.toString(), 'YYY\n', 'charset names are read without case');
});

test('recoding with the shipped maps matches nginx byte for byte', async (t) => {
  const pair = await startPair(t, { conf, files });
  for (const path of ['/koi2utf/a.html', '/koi2utf/big.html', '/utf2koi/a.html', '/utf2koi/big.html', '/koi2win/a.html',
    '/win2koi/a.html', '/win2utf/a.html', '/same/a.html']) {
    const r = await same(t, pair, `GET ${path} HTTP/1.1`);
    assert.equal(r.status, 200, path);
  }
  const koi = await same(t, pair, 'GET /utf2koi/a.html HTTP/1.1');
  assert.equal(koi.header('content-type'), 'text/html; charset=koi8-r');
  assert.equal(koi.header('content-length'), undefined, 'recoding from utf-8 changes the length');
  assert.match(koi.body.toString('latin1'), /&#10003;/, 'a character the map lacks becomes an entity');
  assert.match(koi.body.toString('latin1'), /&#128512;/);
  const utf = await same(t, pair, 'GET /koi2utf/a.html HTTP/1.1');
  assert.ok(utf.body.toString().startsWith('<p>Съешь же ещё этих'));
  const win = await same(t, pair, 'GET /koi2win/a.html HTTP/1.1');
  assert.equal(win.header('content-length'), String(koiText.length), '8-bit to 8-bit keeps the length');
  assert.ok(win.body.subarray(0, 20).equals(winText.subarray(0, 20)));
  assert.equal((await same(t, pair, 'GET /koi2win/a.html HTTP/1.1\r\nHost: localhost\r\nRange: bytes=3-10\r\nConnection: close\r\n\r\n')).status, 206);
  assert.equal((await same(t, pair, 'HEAD /utf2koi/a.html HTTP/1.1')).header('content-length'), undefined);
  const ssi = await same(t, pair, 'GET /ssi/a.html HTTP/1.1');
  assert.equal(ssi.header('content-type'), 'text/html; charset=koi8-r');
  assert.ok(ssi.body.includes(encode('<i>Привет</i>', 'koi8-r')), "an include is recoded to the main response's charset");
  await same(t, pair, 'GET /varsrc/a.html?c=utf-8&s=nonesuch HTTP/1.1');
  assert.equal(logLines(pair.gh, /no "charset_map" between the charsets "nonesuch" and "utf-8"/).length, 1);
});

test('proxied responses: their own charset, override_charset and X-Accel-Charset as nginx', async (t) => {
  const pair = await startPair(t, { conf, files });
  const kept = await same(t, pair, 'GET /proxy/big.html HTTP/1.1');
  assert.equal(kept.header('content-type'), 'text/html; charset=utf-8', 'a response that names its charset keeps it');
  const over = await same(t, pair, 'GET /override/big.html HTTP/1.1');
  assert.equal(over.header('content-type'), 'text/html; charset=koi8-r');
  assert.ok(over.body.equals((await same(t, pair, 'GET /utf2koi/big.html HTTP/1.1')).body), 'recoded as a local file is');
  const accel = await same(t, pair, 'GET /accel/a.html HTTP/1.1');
  assert.equal(accel.header('content-type'), 'text/html; charset=koi8-r');
  assert.equal(accel.header('x-accel-charset'), undefined);
  assert.equal((await same(t, pair, 'GET /accel-ignored/a.html HTTP/1.1')).header('content-type'), 'text/html; charset=utf-8');
  assert.equal((await same(t, pair, 'GET /accel-unknown/a.html HTTP/1.1')).header('content-type'), 'text/html; charset=utf-8');
  assert.equal(logLines(pair.gh, /unknown charset "nonesuch" to override/).length, 1);
});

test("Gatehouse's own conf/ maps recode as the WHATWG tables say", async (t) => {
  const shipped = (name: string) => fs.readFileSync(path.join(import.meta.dirname, '..', '..', 'conf', name));
  const all = Buffer.from(Array.from({ length: 128 }, (_, i) => 0x80 + i));
  const gh = await startGatehouse({
    conf: `events {}
http {
    access_log off;
    types { text/html html; }
    include %%PREFIX%%/koi-utf;
    include %%PREFIX%%/koi-win;
    include %%PREFIX%%/win-utf;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        root %%PREFIX%%/html;
        location /koi/ { charset utf-8; source_charset koi8-r; }
        location /win/ { charset utf-8; source_charset windows-1251; }
        location /k2w/ { charset windows-1251; source_charset koi8-r; }
    }
}
`,
    files: { 'koi-utf': shipped('koi-utf'), 'koi-win': shipped('koi-win'), 'win-utf': shipped('win-utf'), 'html/koi/a.html': all, 'html/win/a.html': all, 'html/k2w/a.html': koiText },
  });
  t.after(() => gh.stop());
  const koi = await ask(gh, 'GET /koi/a.html HTTP/1.1');
  assert.equal(koi.body.toString(), new TextDecoder('koi8-r').decode(all), 'every byte of koi8-r');
  const win = await ask(gh, 'GET /win/a.html HTTP/1.1');
  const expected = [...new TextDecoder('windows-1251').decode(all)].map((c) => (c === '\ufffd' || (c >= '\x80' && c < '\xa0') ? '?' : c)).join('');
  assert.equal(win.body.toString(), expected, 'every defined byte of windows-1251');
  assert.ok((await ask(gh, 'GET /k2w/a.html HTTP/1.1')).body.subarray(0, 20).equals(winText.subarray(0, 20)));
});
