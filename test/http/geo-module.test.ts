/**
 * ngx_http_geo_module: networks (longest prefix, IPv6, IPv4-mapped,
 * `default`, `delete`), ranges (split, insert, delete across /16s),
 * `proxy`/`proxy_recursive` with X-Forwarded-For, addresses that cannot be
 * read, and the configuration's errors and warnings. The address comes from
 * a header (`geo $http_x_addr ...`) so a loopback client can ask for any.
 * Reference: Debian's nginx 1.22 on the same configuration.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { same, sharedPair } from './locations-kit.ts';
import { httpConf, sameCheck } from './small-modules-kit.ts';
import { startGatehouse } from '../kit/server.ts';
import { httpGet } from '../kit/client.ts';

const conf = httpConf(`
    geo $http_x_addr $net {
        default             def;
        127.0.0.0/8         loopback;
        192.0.2.0/24        test;
        192.0.2.128/25      upper;
        192.0.2.130/32      host;
        10.0.0.0/8          ten;
        delete              10.0.0.0/8;
        ::1/128             v6loopback;
        2001:db8::/32       v6test;
        255.255.255.255     none;
    }

    geo $http_x_addr $nodefault {
        192.0.2.0/24        test;
        0.0.0.0/0           world4;
    }

    geo $http_x_addr $ranges {
        ranges;
        default                     def;
        127.0.0.0-127.0.0.255       wide;
        127.0.0.10-127.0.0.20       mid;
        127.0.0.0-127.0.0.5         head;
        127.0.0.250-127.0.0.255     tail;
        10.0.255.0-10.2.0.255       span;
        delete                      10.1.0.0-10.1.255.255;
        192.0.2.0-192.0.2.255       test;
    }

    geo $proxied {
        default             def;
        proxy               127.0.0.1;
        127.0.0.0/8         loopback;
        192.0.2.0/24        test;
        198.51.100.0/24     other;
    }

    geo $proxied_recursive {
        proxy_recursive;
        proxy               127.0.0.0/8;
        proxy               192.0.2.0/24;
        default             def;
        127.0.0.0/8         loopback;
        192.0.2.0/24        test;
        198.51.100.0/24     other;
    }

    geo $proxied_ranges {
        ranges;
        proxy               127.0.0.1;
        default             def;
        192.0.2.1-192.0.2.1 test;
        127.0.0.1-127.0.0.1 loopback;
    }

    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / { return 200 "net=$net nodefault=$nodefault ranges=$ranges\\n"; }
        location /xff { return 200 "proxied=$proxied recursive=$proxied_recursive ranges=$proxied_ranges\\n"; }
    }`);

const pair = sharedPair({ conf });
const ask = async (addr: string | undefined, uri = '/') =>
  (await same(pair(), `GET ${uri} HTTP/1.1${addr === undefined ? '' : `\r\nX-Addr: ${addr}`}`)).body.toString();

test('networks: longest prefix, default, delete, IPv6, v4-mapped', async () => {
  const cases: Array<[string | undefined, string]> = [
    ['127.0.0.1', 'net=loopback nodefault=world4 ranges=head'],
    ['192.0.2.1', 'net=test nodefault=test ranges=test'],
    ['192.0.2.200', 'net=upper nodefault=test ranges=test'],
    ['192.0.2.130', 'net=host nodefault=test ranges=test'],
    ['10.1.2.3', 'net=def nodefault=world4 ranges=def'],
    ['::1', 'net=v6loopback nodefault= ranges=def'],
    ['2001:db8::5', 'net=v6test nodefault= ranges=def'],
    ['2001:0DB8:0:0::1', 'net=v6test nodefault= ranges=def'],
    ['::ffff:192.0.2.1', 'net=test nodefault=test ranges=test'],
    ['not-an-address', 'net=none nodefault=world4 ranges=def'],
    [undefined, 'net=none nodefault=world4 ranges=def'],
    ['192.0.2.1:80', 'net=none nodefault=world4 ranges=def'],
    ['010.0.0.1', 'net=def nodefault=world4 ranges=def'],
  ];
  for (const [addr, want] of cases) assert.equal(await ask(addr), want + '\n', String(addr));
});

test('ranges: split, insert at either end, /16 spans and delete', async () => {
  const cases: Array<[string, string]> = [
    ['127.0.0.0', 'head'], ['127.0.0.5', 'head'], ['127.0.0.6', 'wide'], ['127.0.0.9', 'wide'],
    ['127.0.0.10', 'mid'], ['127.0.0.20', 'mid'], ['127.0.0.21', 'wide'],
    ['127.0.0.249', 'wide'], ['127.0.0.250', 'tail'], ['127.0.1.0', 'def'],
    ['10.0.254.255', 'def'], ['10.0.255.0', 'span'], ['10.1.0.1', 'def'], ['10.2.0.255', 'span'], ['10.2.1.0', 'def'],
  ];
  for (const [addr, want] of cases) assert.match(await ask(addr), new RegExp(`ranges=${want}\\n$`), addr);
});

test('proxy: X-Forwarded-For from a trusted address, recursive or not', async () => {
  const xff = async (value: string) => (await same(pair(), `GET /xff HTTP/1.1\r\nX-Forwarded-For: ${value}`)).body.toString();
  assert.equal(await ask(undefined, '/xff'), 'proxied=loopback recursive=loopback ranges=loopback\n');
  assert.equal(await xff('192.0.2.1'), 'proxied=test recursive=test ranges=test\n');
  assert.equal(await xff('198.51.100.7, 192.0.2.1'), 'proxied=test recursive=other ranges=test\n');
  assert.equal(await xff('198.51.100.7 192.0.2.1,, '), 'proxied=test recursive=other ranges=test\n');
  assert.equal(await xff('garbage, 192.0.2.1'), 'proxied=test recursive=test ranges=test\n');
  assert.equal(await xff('192.0.2.1, garbage'), 'proxied=loopback recursive=loopback ranges=loopback\n');
  assert.equal(await xff('[2001:db8::1]:8000'), 'proxied=def recursive=def ranges=def\n');
  assert.equal(await xff('192.0.2.1:8000'), 'proxied=test recursive=test ranges=test\n');
  // several headers: the last one first
  const two = await same(pair(), 'GET /xff HTTP/1.1\r\nX-Forwarded-For: 198.51.100.7\r\nX-Forwarded-For: 192.0.2.1');
  assert.equal(two.body.toString(), 'proxied=test recursive=other ranges=test\n');
});

test('volatile: the value follows a changed source within one request', async (t) => {
  // geo's `volatile` came after nginx 1.22: checked against nginx-tests' geo_volatile.t expectations
  const srv = await startGatehouse({
    conf: httpConf(`
    geo $arg_ip $cached { default none; 192.0.2.1 one; 192.0.2.2 two; }
    geo $arg_ip $uncached { volatile; default none; 192.0.2.1 one; 192.0.2.2 two; }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / { set $before "$cached/$uncached"; set $args ip=192.0.2.2; return 200 "$before $cached/$uncached\\n"; }
    }`),
  });
  t.after(() => srv.stop());
  const r = await httpGet(srv.port(8080), '/?ip=192.0.2.1');
  assert.equal(r.body.toString(), 'one/one one/two\n');
});

test('configuration errors and warnings are nginx\'s', async () => {
  const geo = (body: string) => httpConf(`    geo $g {\n${body}\n    }`);
  const cases = [
    '127.0.0.1/32 a; ranges;',
    'default a; ranges;',
    'ranges; 127.0.0.0-127.0.0.10 a; 127.0.0.5-127.0.0.20 b;',
    'ranges; 127.0.0.10-127.0.0.1 a;',
    'ranges; 127.0.0.1 a;',
    'ranges; delete 127.0.0.0-127.0.0.1;',
    'ranges; 127.0.0.0-127.0.0.1 a; 127.0.0.0-127.0.0.1 b;',
    'ranges; default a; default b;',
    '300.0.0.1 a;',
    '127.0.0.1/33 a;',
    '127.0.0.1/8 a;',
    '10.0.0.0/8 a; 10.0.0.0/8 b;',
    'default a; default b;',
    'delete 10.0.0.0/8;',
    'delete 4.0.0.0/6;',
    '127.0.0.1 a b;',
    'proxy;',
    'proxy 300.1.1.1;',
    '127.0.0.1 { }',
  ];
  for (const body of cases) await sameCheck(geo(body));
  await sameCheck(httpConf('    geo g { default a; }'));
  await sameCheck(httpConf('    geo $a g { default a; }'));
  await sameCheck(httpConf('    geo $remote_addr { default a; }'));
  await sameCheck(httpConf('    geo $g { include geo.conf; default a; }'), { 'geo.conf': '127.0.0.1 a;\n10.0.0.0/8 b;\n' });
});
