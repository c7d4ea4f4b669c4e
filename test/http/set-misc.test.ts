// ngx_http_set_misc_module: the same configuration on Gatehouse and on Debian's nginx with
// libnginx-mod-http-set-misc (after ndk_http_module); the bodies must be the same.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { startPair } from '../kit/pair.ts';
import { ask, same } from '../lua/hooks-kit.ts';

const pair = await startPair({ after }, {
  conf: `load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_set_misc_module.so;
load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;
events {}
http {
    access_log off;
    default_type text/plain;
    upstream_list backends a b c d;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /esc {
            set_unescape_uri $raw $arg_s;
            set_escape_uri $e $raw;
            set $inplace $raw;
            set_escape_uri $inplace;
            set_quote_sql_str $sql $raw;
            set_quote_json_str $json $raw;
            echo "raw=[$raw]";
            echo "e=$e in=$inplace";
            echo "sql=$sql";
            echo "json=$json";
        }
        location /digest {
            set_md5 $md5 $arg_s;
            set_sha1 $sha1 $arg_s;
            set_encode_base64 $b64 $arg_s;
            set_decode_base64 $back $b64;
            set_encode_hex $hex $arg_s;
            set_decode_hex $unhex $hex;
            echo "$md5 $sha1";
            echo "$b64 $back $hex $unhex";
        }
        location /empty {
            set $a "";
            set $b "kept";
            set_if_empty $a "fallback $arg_x";
            set_if_empty $b "not used";
            echo "$a|$b";
        }
        location /hashed {
            set_hashed_upstream $backend backends $arg_key;
            echo "$backend";
        }
        location /random {
            set_random $n 3 5;
            set_random $same 7 7;
            echo "$n $same";
        }
        location /more {
            set_unescape_uri $raw $arg_s;
            set_quote_pgsql_str $pg $raw;
            set_encode_base64url $b64u $raw;
            set_decode_base64url $b64u_back $b64u;
            set_encode_base32 $b32 $raw;
            set_decode_base32 $b32_back $b32;
            set_hmac_sha1 $h1 "secret key" $raw;
            set_encode_base64 $h1;
            set_hmac_sha256 $h256 "secret key" $raw;
            set_encode_hex $h256;
            echo "pg=$pg";
            echo "b64u=$b64u $b64u_back";
            echo "b32=$b32 $b32_back";
            echo "hmac=$h1 $h256";
        }
        location /gen {
            set_secure_random_alphanum $an 12;
            set_secure_random_lcalpha $lc 8;
            set_formatted_gmt_time $gmt "%Y-%m-%d %a %b %e %H%%";
            set_formatted_local_time $local "%Y/%m/%d %A %B";
            echo "$an $lc";
            echo "$gmt|$local";
        }
        location /b32 {
            set_base32_padding off;
            set_base32_alphabet "abcdefghijklmnopqrstuvwxyz234567";
            set_encode_base32 $e $arg_s;
            set_decode_base32 $d $e;
            echo "$e $d";
        }
        location /rotate {
            set_rotate $r 1 3;
            set $v 7;
            set_rotate $v 5 8;
            set $w 9;
            set_rotate $w 5 8;
            echo "$r $v $w";
        }
        location /today {
            set_local_today $today;
            echo "$today";
        }
    }
}
`,
});

test('escape, unescape (+ is a space), quote for SQL and JSON, in place', async () => {
  const r = await same(pair, "/esc?s=a%20b+c%2F%3F%26%3D%27%22%5C%0A%09%C3%A9~-._!*()");
  assert.equal(r.body.split('\n')[2], "e=a%20b%20c%2F%3F%26%3D'%22%5C%0A%09%C3%A9~-._!*() in=a%20b%20c%2F%3F%26%3D'%22%5C%0A%09%C3%A9~-._!*()");
});

test('md5, sha1, base64 and hex both ways', async () => {
  const r = await same(pair, '/digest?s=hello');
  assert.equal(r.body, '5d41402abc4b2a76b9719d911017c592 aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d\naGVsbG8= hello 68656c6c6f hello\n');
});

test('set_if_empty', async () => {
  assert.equal((await same(pair, '/empty?x=1')).body, 'fallback 1|kept\n');
});

test('set_hashed_upstream picks from upstream_list as set-misc hashes', async () => {
  for (const key of ['', 'a', 'user42', 'Hello', 'x'.repeat(40)]) await same(pair, `/hashed?key=${key}`);
});

test('set_random stays in its range; set_local_today is today', async () => {
  for (let i = 0; i < 10; i++) assert.match((await ask(pair.gh, '/random')).body, /^[345] 7\n$/);
  const today = (await same(pair, '/today')).body;
  assert.match(today, /^\d{4}-\d\d-\d\d\n$/);
});

test('pgsql quoting, base64url, base32, hmac_sha1 and hmac_sha256', async () => {
  for (const v of ['', 'a', 'ab%27c', 'hello%20world%21%3F%3E%FF%00', 'xxxxxxxxxyz', 'caf%C3%A9%E2%82%AC%C3']) await same(pair, `/more?s=${v}`);
  const r = await same(pair, '/more?s=hello');
  assert.match(r.body, /^pg=E'hello'\nb64u=aGVsbG8 hello\nb32=/);
});

test('secure random strings and formatted times', async () => {
  const r = await ask(pair.gh, '/gen');
  assert.match(r.body, /^[A-Za-z0-9]{12} [a-z]{8}\n/);
  const [, times] = r.body.split('\n');
  if (pair.ng) assert.equal((await ask(pair.ng, '/gen')).body.split('\n')[1], times);
});

test('set_rotate: the value plus one within its range; none: from', async () => {
  for (let i = 0; i < 2; i++) assert.equal((await same(pair, '/rotate')).body, '1 8 5\n');
});

test('set_base32_padding off and set_base32_alphabet', async () => {
  for (const v of ['a', 'hello', 'abcdefghijk']) assert.match((await same(pair, `/b32?s=${v}`)).body, new RegExp(` ${v}\n$`));
});
