/**
 * ngx_http_referer_module: `valid_referers` with none/blocked, exact names,
 * wildcards (longest wins), URI parts, regexes (caseless, `(?-i)`),
 * `server_names` (names given after the directive, regex names), levels,
 * and nginx's configuration errors. Reference: Debian's nginx 1.22.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { same, sharedPair } from './locations-kit.ts';
import { httpConf, sameCheck } from './small-modules-kit.ts';

const conf = httpConf(`
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost *.wild.test ~^re[0-9]+\\.test$;
        valid_referers none server.example;
        location / { return 200 "[$invalid_referer]\\n"; }
        location /plain {
            valid_referers www.example.org EXAMPLE.net/pics/ example.com/;
            return 200 "[$invalid_referer]\\n";
        }
        location /blocked {
            valid_referers blocked www.example.org;
            return 200 "[$invalid_referer]\\n";
        }
        location /wild {
            valid_referers *.example.org .example.com www.example.* www.example.co.* *.a.example.org/deep;
            return 200 "[$invalid_referer]\\n";
        }
        location /regex {
            valid_referers ~example\\.org/ok ~(?-i)CaSe\\.test;
            return 200 "[$invalid_referer]\\n";
        }
        location /names {
            valid_referers server_names;
            return 200 "[$invalid_referer]\\n";
        }
        location /twice {
            valid_referers a.example;
            valid_referers b.example;
            return 200 "[$invalid_referer]\\n";
        }
        location /none {
            return 200 "[$invalid_referer]\\n";
        }
    }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name other;
        location / { return 200 "[$invalid_referer]\\n"; }
    }`);

const pair = sharedPair({ conf });

async function check(uri: string, referer: string | undefined, want: '' | '1', host = 'localhost') {
  const head = `GET ${uri} HTTP/1.0\r\nHost: ${host}${referer === undefined ? '' : `\r\nReferer: ${referer}`}\r\n\r\n`;
  const r = await same(pair(), head);
  assert.equal(r.body.toString(), `[${want}]\n`, `${uri} ${referer}`);
}

test('none, blocked, schemes and short referers', async () => {
  await check('/', undefined, '');
  await check('/', 'http://server.example', '');
  await check('/', 'HTTPS://Server.Example/x', '');
  await check('/', 'http://other.example', '1');
  await check('/plain', undefined, '1');
  await check('/plain', '', '1');
  await check('/blocked', '', '');
  await check('/blocked', 'www.example.org', '');
  await check('/blocked', 'http://a.b', '');
  await check('/blocked', 'ftp://www.example.com', '');
  await check('/blocked', 'http://www.example.com', '1');
  // a location without valid_referers has the server's
  await check('/none', 'http://anything', '1');
  await check('/none', undefined, '');
  await check('/none', 'garbage', '1');
  // a server without any: always valid
  await check('/', 'garbage', '', 'other');
});

test('exact names, ports and URI parts', async () => {
  await check('/plain', 'http://www.example.org', '');
  await check('/plain', 'http://www.example.org:8080/x', '');
  await check('/plain', 'http://www.example.org.evil', '1');
  await check('/plain', 'http://example.net/pics/a.png', '');
  await check('/plain', 'http://example.net/Pics/a.png', '1');
  await check('/plain', 'http://example.net:80/pics/', '');
  await check('/plain', 'http://example.net', '1');
  await check('/plain', 'http://example.com', '1');
  await check('/plain', 'http://example.com/', '');
  await check('/plain', `http://www.example.org/${'a'.repeat(300)}`, '');
  await check('/plain', `http://${'a'.repeat(257)}`, '1');
});

test('wildcards: the longest match wins, with its URI part', async () => {
  await check('/wild', 'http://www.example.org', '');
  await check('/wild', 'http://x.y.example.org', '');
  await check('/wild', 'http://example.org', '1');
  await check('/wild', 'http://example.com', '');
  await check('/wild', 'http://a.example.com', '');
  await check('/wild', 'http://www.example.net', '');
  await check('/wild', 'http://www.example', '1');
  await check('/wild', 'http://www.example.co.uk', '');
  await check('/wild', 'http://b.a.example.org/deeper', '');
  await check('/wild', 'http://b.a.example.org/x', '1');
  await check('/wild', 'http://a.example.org/x', '');
});

test('regexes: caseless by default, after the scheme, (?-i)', async () => {
  await check('/regex', 'http://www.EXAMPLE.org/OK', '');
  await check('/regex', 'https://example.org/okay', '');
  await check('/regex', 'http://example.org/', '1');
  await check('/regex', 'http://CaSe.test', '');
  await check('/regex', 'http://case.test', '1');
});

test('server_names: exact, wildcard and regex names of the server; directives add up', async () => {
  await check('/names', 'http://localhost/', '');
  await check('/names', 'http://LOCALHOST:1/', '');
  await check('/names', 'http://x.wild.test', '');
  await check('/names', 'http://re12.test/', '');
  await check('/names', 'http://re12x.test/', '1');
  await check('/names', 'http://other', '1');
  await check('/twice', 'http://a.example', '');
  await check('/twice', 'http://b.example', '');
  await check('/', 'http://whatever', '', 'other');
});

test('configuration errors are nginx\'s', async () => {
  const loc = (args: string) => httpConf(`    server { listen 127.0.0.1:8999; location / { valid_referers ${args}; } }`);
  for (const args of ['none', 'blocked none', 'none ~foo', '""', '~', 'a.*.example', '*.a.*', 'a..b', '*example.com', 'a.example A.example', '.a.example a.example', '*.a.example .a.example', '~(unclosed', 'none server_names']) {
    await sameCheck(loc(args));
  }
  await sameCheck(httpConf('    valid_referers none;'));
  await sameCheck(httpConf('    server { referer_hash_max_size x; }'));
  await sameCheck(httpConf('    server { referer_hash_bucket_size 64; referer_hash_bucket_size 32; }'));
});
