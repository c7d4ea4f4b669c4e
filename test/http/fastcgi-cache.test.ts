/**
 * fastcgi_cache and scgi_cache (the upstream engine's cache under the CGI
 * modules' prefixes), against a real php-fpm and a small SCGI server that
 * count how often they are asked, compared with Debian's nginx on the same
 * configuration: MISS, HIT without the backend being asked again, BYPASS
 * (stored all the same), *_no_cache, *_cache_valid per status, EXPIRED
 * (X-Accel-Expires in the past), and nginx's warning without a key.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startPair } from '../kit/pair.ts';
import { both, phpFpmSkip, startPhpFpm } from './fastcgi-kit.ts';
import type { PhpFpm } from './fastcgi-kit.ts';

const BIN = fileURLToPath(new URL('../../bin/gatehouse', import.meta.url));

/** Counts its runs per server (SERVER_PORT) and URI, in a file next to it; some URIs answer 404 or expire at once. */
const COUNT = `<?php
$uri = $_SERVER['DOCUMENT_URI'];
$f = __DIR__ . '/count-' . $_SERVER['SERVER_PORT'] . '-' . md5($uri);
$n = (int) @file_get_contents($f) + 1;
file_put_contents($f, $n);
if (str_contains($uri, 'missing')) http_response_code(404);
if (str_contains($uri, 'expired')) header('X-Accel-Expires: @1');
header('Content-Type: text/plain');
echo "run $n\\n";
`;

/** An SCGI server answering the same way, counting per SERVER_PORT and DOCUMENT_URI. */
const scgiRuns = new Map<string, number>();
const scgi = net.createServer((s) => {
  let buf = Buffer.alloc(0);
  s.on('data', (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    const colon = buf.indexOf(0x3a);
    if (colon < 0) return;
    const len = Number(buf.toString('latin1', 0, colon));
    if (buf.length < colon + 2 + len) return;
    const v = buf.toString('latin1', colon + 1, colon + 1 + len).split('\0');
    const get = (n: string) => v[v.indexOf(n) + 1];
    const uri = get('DOCUMENT_URI');
    const key = `${get('SERVER_PORT')} ${uri}`;
    const n = (scgiRuns.get(key) ?? 0) + 1;
    scgiRuns.set(key, n);
    let head = uri.includes('missing') ? 'Status: 404 Not Found\r\n' : 'Status: 200 OK\r\n';
    if (uri.includes('expired')) head += 'X-Accel-Expires: @1\r\n';
    s.end(`${head}Content-Type: text/plain\r\n\r\nrun ${n}\n`);
  });
  s.on('error', () => undefined);
});

let fpm: PhpFpm | undefined;

before(async () => {
  await new Promise<void>((r) => scgi.listen(0, '127.0.0.1', r));
  if (!phpFpmSkip) fpm = await startPhpFpm({ 'count.php': COUNT });
});

after(async () => {
  scgi.close();
  await fpm?.stop();
});

const scgiPort = () => (scgi.address() as net.AddressInfo).port;

/** One location per module, caching by URI, with the status in X-Cache. */
const conf = (fpmPort: number | undefined) => `
events {}
http {
    access_log %%PREFIX%%/access.log;
    fastcgi_temp_path %%PREFIX%%/fastcgi_temp;
    scgi_temp_path %%PREFIX%%/scgi_temp;
    fastcgi_cache_path %%PREFIX%%/fcache levels=1:2 keys_zone=php:1m;
    scgi_cache_path %%PREFIX%%/scache keys_zone=sc:1m;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        add_header X-Cache $upstream_cache_status always;
        ${fpmPort === undefined ? '' : `location /php/ {
            fastcgi_param SCRIPT_FILENAME ${fpm!.dir}/count.php;
            fastcgi_param SERVER_PORT $server_port;
            fastcgi_param DOCUMENT_URI $uri;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_cache php;
            fastcgi_cache_key $uri;
            fastcgi_cache_valid 200 1h;
            fastcgi_cache_bypass $arg_bypass;
            fastcgi_no_cache $arg_nocache;
            fastcgi_pass 127.0.0.1:${fpmPort};
        }`}
        location /scgi/ {
            scgi_param SERVER_PORT $server_port;
            scgi_param DOCUMENT_URI $uri;
            scgi_cache sc;
            scgi_cache_key $uri;
            scgi_cache_valid 200 1h;
            scgi_cache_bypass $arg_bypass;
            scgi_no_cache $arg_nocache;
            scgi_pass 127.0.0.1:${scgiPort()};
        }
    }
}
`;

const get = (uri: string) => `GET ${uri} HTTP/1.0\r\nHost: localhost\r\n\r\n`;

/** The X-Cache value and the body. */
function seen(response: string): string {
  const status = /^HTTP\/1\.1 (\d+)/.exec(response)?.[1];
  const cache = /\r\nX-Cache: ([A-Z]*)\r\n/.exec(response)?.[1] ?? '-';
  return `${status} ${cache} ${response.slice(response.indexOf('\r\n\r\n') + 4).trim()}`;
}

test('fastcgi_cache and scgi_cache, as nginx', async (t) => {
  const pair = await startPair(t, { conf: conf(fpm?.port) });
  const ask = async (uri: string) => seen((await both(pair, get(uri))).response);

  for (const prefix of fpm ? ['/php/', '/scgi/'] : ['/scgi/']) {
    await t.test(`${prefix}: MISS, then HIT without asking the backend; BYPASS goes there and stores`, async () => {
      assert.equal(await ask(`${prefix}a`), '200 MISS run 1');
      assert.equal(await ask(`${prefix}a`), '200 HIT run 1');
      assert.equal(await ask(`${prefix}a?x=other`), '200 HIT run 1');
      assert.equal(await ask(`${prefix}a?bypass=1`), '200 BYPASS run 2');
      assert.equal(await ask(`${prefix}a`), '200 HIT run 2');
    });

    await t.test(`${prefix}: *_no_cache answers without storing`, async () => {
      assert.equal(await ask(`${prefix}b?nocache=1`), '200 MISS run 1');
      assert.equal(await ask(`${prefix}b`), '200 MISS run 2');
      assert.equal(await ask(`${prefix}b`), '200 HIT run 2');
    });

    await t.test(`${prefix}: *_cache_valid 200 only: a 404 is asked for each time`, async () => {
      assert.equal(await ask(`${prefix}missing`), '404 MISS run 1');
      assert.equal(await ask(`${prefix}missing`), '404 MISS run 2');
    });

    await t.test(`${prefix}: a stored response already expired: EXPIRED, asked again`, async () => {
      assert.equal(await ask(`${prefix}expired`), '200 MISS run 1');
      assert.equal(await ask(`${prefix}expired`), '200 EXPIRED run 2');
    });
  }
});

test('*_cache without *_cache_key: warned about, as nginx does', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gatehouse-cgicache-'));
  try {
    const file = path.join(dir, 'nginx.conf');
    fs.mkdirSync(path.join(dir, 'logs'));
    fs.writeFileSync(file, `events {}\nhttp {\n    scgi_cache_path ${dir}/c keys_zone=z:1m;\n    server {\n        location / {\n            scgi_cache z;\n            scgi_pass 127.0.0.1:1;\n        }\n    }\n}\n`);
    const gh = spawnSync(BIN, ['-t', '-p', dir, '-c', file], { encoding: 'utf8' });
    assert.equal(gh.status, 0, gh.stderr);
    // nginx's merge-time warning names the end of the http block
    assert.match(gh.stderr, /\[warn\] no "scgi_cache_key" for "scgi_cache" in .*nginx\.conf:10\n/);
    if (fs.existsSync('/usr/sbin/nginx')) {
      const ng = spawnSync('/usr/sbin/nginx', ['-t', '-p', dir, '-c', file, '-e', `${dir}/error.log`, '-g', `pid ${dir}/ng.pid;`], { encoding: 'utf8' });
      assert.equal(ng.status, 0, ng.stderr);
      assert.match(ng.stderr, /\[warn\] no "scgi_cache_key" for "scgi_cache" in .*nginx\.conf:10\n/);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
