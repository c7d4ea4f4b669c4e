/**
 * ngx_http_autoindex_module: listings compared byte for byte with Debian's
 * nginx 1.22 on the same tree — HTML (names cut at 50 characters, HTML and
 * URI escapes, directory slashes and padding, exact and rounded sizes up
 * to gigabytes, local time), XML, JSON and JSONP (callbacks, bad
 * callbacks), symbolic links (to files, to directories, dangling), HEAD,
 * index files winning, missing directories, and the directives' checks.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { same, sharedPair } from './locations-kit.ts';
import type { Pair } from './locations-kit.ts';
import { httpConf, sameCheck } from './small-modules-kit.ts';

const conf = httpConf(`
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        root %%PREFIX%%/www;
        autoindex on;
        location /rounded/ { autoindex_exact_size off; alias %%PREFIX%%/www/sizes/; }
        location /local/ { autoindex_localtime on; alias %%PREFIX%%/www/; }
        location /xml/ { autoindex_format xml; alias %%PREFIX%%/www/; }
        location /json/ { autoindex_format json; alias %%PREFIX%%/www/; }
        location /jsonp/ { autoindex_format jsonp; alias %%PREFIX%%/www/; }
        location /off/ { autoindex off; alias %%PREFIX%%/www/; }
    }`);

const long = (n: number, c = 'x') => c.repeat(n);

/** Entries of the listed tree (files: content length matters). */
const files: Record<string, string> = {
  'www/plain.txt': 'hello\n',
  'www/empty': '',
  [`www/${long(49)}`]: '',
  [`www/${long(50)}`]: '',
  [`www/${long(51)}`]: '',
  [`www/${long(45)}<&>"`]: '',
  [`www/${long(60, '>')}`]: '',
  'www/escape %?#:;!*\'()~+,=@$&[].txt': '',
  'www/bytes-\xc3\xa9\xff.txt': '',
  'www/.hidden': '',
  [`www/${long(48, 'd')}/keep`]: '',
  [`www/${long(49, 'e')}/keep`]: '',
  [`www/${long(50, 'f')}/keep`]: '',
  'www/sub dir <x>/keep': '',
  'www/with-index/index.html': 'index page\n',
  'www/sizes/s0': '',
  'www/sizes/s9999': long(9999),
  'www/sizes/s10000': long(10000),
  'www/sizes/s10751': long(10751),
  'www/sizes/s10752': long(10752),
};

/** Byte-named files are written through Buffers so both servers see the same bytes. */
function writeTree(root: string): void {
  for (const [rel, text] of Object.entries(files)) {
    const file = Buffer.from(path.join(root, rel), 'latin1');
    fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    fs.writeFileSync(file, text);
  }
  const sizes = path.join(root, 'www/sizes');
  for (const [name, size] of [['m1', 1024 * 1024 - 1], ['m2', 1024 * 1024 + 524287], ['m3', 1024 * 1024 + 524288], ['g1', 3 * 1024 * 1024 * 1024 + 536870911], ['g2', 3 * 1024 * 1024 * 1024 + 536870912]] as const) {
    const fd = fs.openSync(path.join(sizes, name), 'w');
    fs.ftruncateSync(fd, size);
    fs.closeSync(fd);
  }
  const www = path.join(root, 'www');
  fs.symlinkSync(path.join(www, 'plain.txt'), path.join(www, 'link-to-file'));
  fs.symlinkSync(path.join(www, 'sizes'), path.join(www, 'link-to-dir'));
  fs.symlinkSync(path.join(www, 'nowhere'), path.join(www, 'link-dangling'));
  // one mtime everywhere (lutimes: the dangling link itself)
  const stamp = new Date('2024-05-06T07:08:09Z');
  const walk = (p: string) => {
    for (const name of fs.readdirSync(p, { encoding: 'buffer' })) {
      const child = Buffer.concat([Buffer.from(p + '/'), name]);
      const st = fs.lstatSync(child);
      if (st.isDirectory()) walk(child.toString('latin1'));
      fs.lutimesSync(child, stamp, stamp);
    }
  };
  walk(www);
  fs.utimesSync(www, stamp, stamp);
}

const pair = sharedPair({ conf });
let written = false;
function tree(): Pair {
  const p = pair();
  if (!written) {
    for (const srv of [p.gh, p.ng]) if (srv) writeTree(srv.path(''));
    written = true;
  }
  return p;
}

test('HTML listing: names, escapes, padding and exact sizes', async () => {
  const r = await same(tree(), 'GET / HTTP/1.1');
  assert.equal(r.status, 200);
  assert.equal(r.header('content-type'), 'text/html');
  const body = r.body.toString('latin1');
  assert.ok(body.startsWith('<html>\r\n<head><title>Index of /</title></head>\r\n<body>\r\n<h1>Index of /</h1><hr><pre><a href="../">../</a>\r\n'));
  assert.match(body, new RegExp(`<a href="${long(51)}">${long(47)}\\.\\.&gt;</a> `));
  assert.doesNotMatch(body, /\.hidden/);
  assert.match(body, /href="link-to-dir\/"/);
  await same(tree(), 'GET /sizes/ HTTP/1.0');
  await same(tree(), 'GET /sub%20dir%20%3Cx%3E/ HTTP/1.1');
  await same(tree(), `GET /${long(50, 'f')}/ HTTP/1.1`);
});

test('rounded sizes, local time, XML, JSON, JSONP', async () => {
  assert.match((await same(tree(), 'GET /rounded/ HTTP/1.1')).body.toString(), /\s3G\r\n/);
  await same(tree(), 'GET /local/ HTTP/1.1');
  const xml = await same(tree(), 'GET /xml/ HTTP/1.1');
  assert.equal(xml.header('content-type'), 'text/xml; charset=utf-8');
  const json = await same(tree(), 'GET /json/ HTTP/1.1');
  assert.equal(json.header('content-type'), 'application/json');
  await same(tree(), 'GET /json/sizes/ HTTP/1.1');
  await same(tree(), 'GET /json/with-index/x/ HTTP/1.1');
  const jsonp = await same(tree(), 'GET /jsonp/sizes/?callback=cb.x_1 HTTP/1.1');
  assert.equal(jsonp.header('content-type'), 'application/javascript');
  assert.ok(jsonp.body.toString().startsWith('/* callback */\r\ncb.x_1(['));
  for (const args of ['callback=', 'other=1', 'callback=a-b', `callback=${long(129)}`, `callback=${long(128)}`]) {
    await same(tree(), `GET /jsonp/sizes/?${args} HTTP/1.1`);
  }
});

test('HEAD, methods, index files, missing directories, autoindex off', async () => {
  const head = await same(tree(), 'HEAD /sizes/ HTTP/1.1');
  assert.equal(head.body.length, 0);
  assert.equal((await same(tree(), 'GET /with-index/ HTTP/1.1')).body.toString(), 'index page\n');
  assert.equal((await same(tree(), 'GET /nowhere/ HTTP/1.1')).status, 404);
  assert.equal((await same(tree(), 'GET /plain.txt/ HTTP/1.1')).status, 404);
  await same(tree(), 'POST /sizes/ HTTP/1.1\r\nContent-Length: 0');
  await same(tree(), 'DELETE /sizes/ HTTP/1.1');
  assert.equal((await same(tree(), 'GET /off/ HTTP/1.1')).status, 403);
  await same(tree(), 'GET /sizes HTTP/1.1');
});

test('directives: flags, formats, duplicates', async () => {
  for (const body of ['autoindex maybe;', 'autoindex_format yaml;', 'autoindex on; autoindex off;', 'autoindex_format xml; autoindex_format json;', 'autoindex_exact_size on; server { location / { autoindex_localtime on; autoindex_localtime on; } }', 'server { location / { if ($args) { autoindex on; } } }']) {
    await sameCheck(httpConf(`    ${body}`));
  }
});
