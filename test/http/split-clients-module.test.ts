/**
 * ngx_http_split_clients_module: the same keys land in the same parts as
 * under nginx (MurmurHash2 over the bytes, fractional percentages, `*`,
 * totals under 100% leaving an empty value), and nginx's configuration
 * errors. Reference: Debian's nginx 1.22 on the same configuration.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { same, sharedPair } from './locations-kit.ts';
import { httpConf, sameCheck } from './small-modules-kit.ts';

const conf = httpConf(`
    split_clients "k=$arg_k" $part {
        10%     a;
        20.5%   b;
        0.01%   tiny;
        33.33%  c;
        *       rest;
    }

    split_clients $arg_k $gaps {
        25%     first;
        25%     second;
    }

    split_clients "$uri" $bytes {
        50%     low;
        *       high;
    }

    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / { return 200 "$part $gaps $bytes\\n"; }
    }`);

const pair = sharedPair({ conf });

test('keys split as under nginx', async () => {
  const seen = new Map<string, number>();
  for (let k = 0; k < 150; k++) {
    const body = (await same(pair(), `GET /k${k}?k=${k * 7919} HTTP/1.1`)).body.toString();
    const [part, gaps] = body.trim().split(' ');
    seen.set(part, (seen.get(part) ?? 0) + 1);
    seen.set(`gaps:${gaps ?? ''}`, (seen.get(`gaps:${gaps ?? ''}`) ?? 0) + 1);
  }
  // every big part was hit, and a total under 100% leaves some keys without a value
  for (const name of ['a', 'b', 'c', 'rest', 'gaps:first', 'gaps:second']) assert.ok(seen.get(name), name);
  assert.ok([...seen.keys()].some((k) => k === 'gaps:'), 'empty value past 50%');
});

test('the hash runs over bytes (a decoded $uri with bytes over 0x7f), lengths 0 to 3 mod 4', async () => {
  for (const uri of ['/%FF', '/%C3%A9', '/%80%81%82', '/abcd', '/abcde', '/abcdef', '/abcdefg', '/']) {
    await same(pair(), `GET ${uri} HTTP/1.1`);
  }
});

test('configuration errors are nginx\'s', async () => {
  const split = (body: string, head = '$arg_k $v') => httpConf(`    split_clients ${head} {\n${body}\n    }`);
  for (const body of ['0% a;', 'abc a;', '1.234% a;', '50 a;', '% a;', '1..5% a;', '60% a; 50% b;', '50% a; * b; 1% c;', '100% a; * b;', '100.01% a;', '50.5% a; 49.5% b;', '10% a { }']) {
    await sameCheck(split(body));
  }
  await sameCheck(split('* a;', '$arg_k v'));
  await sameCheck(split('* a;', '$arg_k $remote_addr'));
  await sameCheck(split('* a;', '$unknown_var $v'));
});
