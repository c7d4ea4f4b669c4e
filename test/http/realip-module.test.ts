/**
 * ngx_http_realip_module: X-Real-IP, X-Forwarded-For (recursive or not,
 * several headers, ports, IPv6 text), other headers, the PROXY protocol,
 * trusted and untrusted clients, the server's settings in POST_READ and the
 * location's in PREACCESS, what follows the new address (allow/deny, log
 * lines), keepalive requests starting over, and configuration messages.
 * Reference: Debian's nginx 1.22 on the same configuration.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { logMatches, same, sharedPair } from './locations-kit.ts';
import { httpConf, sameCheck } from './small-modules-kit.ts';
import { parseResponses, rawRequest } from '../kit/client.ts';

// realip's PREACCESS run comes after rewrite-phase `return`: the values are shown by a static file's header
const show = 'root %%PREFIX%%; try_files /f =404; add_header X-Show "addr=$remote_addr port=$remote_port real=$realip_remote_addr";';
const showNoPort = 'root %%PREFIX%%; try_files /f =404; add_header X-Show "addr=$remote_addr real=$realip_remote_addr";';

const conf = httpConf(`
    set_real_ip_from 127.0.0.1;
    set_real_ip_from 10.0.0.0/8;
    add_header X-IP $remote_addr;
    add_header X-Geo $geo;
    geo $geo { default world; 127.0.0.0/8 loopback; 192.0.2.0/24 test; }

    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / { ${show} }
        location /xff { real_ip_header X-Forwarded-For; ${show} }
        location /xffr { real_ip_header X-Forwarded-For; real_ip_recursive on; ${show} }
        location /custom { real_ip_header x-client-ADDRESS; ${show} }
        location /untrusted { set_real_ip_from 10.0.0.0/8; real_ip_header X-Forwarded-For; ${showNoPort} }
        location /deny { real_ip_header X-Forwarded-For; deny 192.0.2.1; allow all; ${showNoPort} }
        location /noport { ${showNoPort} }
    }

    # realip in POST_READ: the server's settings apply before a server-level return
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        return 204;
    }

    # realip only in a location (PREACCESS), after rewrite-phase variables
    server {
        listen 127.0.0.1:%%PORT_8082%%;
        set_real_ip_from 192.0.2.0/24;
        location / {
            set_real_ip_from 127.0.0.1;
            real_ip_header X-Forwarded-For;
            ${show}
        }
        location /ret {
            set_real_ip_from 127.0.0.1;
            real_ip_header X-Forwarded-For;
            return 200 "$remote_addr\\n";
        }
    }

    server {
        listen 127.0.0.1:%%PORT_8083%% proxy_protocol;
        location / {
            real_ip_header proxy_protocol;
            ${show}
        }
        location /pp-untrusted {
            set_real_ip_from 10.0.0.0/8;
            real_ip_header proxy_protocol;
            ${showNoPort}
        }
    }`);

const pair = sharedPair({ conf, files: { f: 'ok\n' } });
const body = async (req: string, port = 8080) => (await same(pair(), req, port)).header('x-show') ?? '';

test('X-Real-IP by default; X-Forwarded-For with and without recursion', async () => {
  assert.equal(await body('GET / HTTP/1.1\r\nX-Real-IP: 192.0.2.1'), 'addr=192.0.2.1 port= real=127.0.0.1');
  assert.equal(await body('GET / HTTP/1.1\r\nX-Real-IP: 192.0.2.1, 192.0.2.2'), 'addr=192.0.2.2 port= real=127.0.0.1');
  assert.equal(await body('GET /noport HTTP/1.1\r\nX-Real-IP: bogus'), 'addr=127.0.0.1 real=127.0.0.1');
  assert.equal(await body('GET /noport HTTP/1.1\r\nX-Forwarded-For: 192.0.2.1'), 'addr=127.0.0.1 real=127.0.0.1');
  const cases: Array<[string, string, string]> = [
    ['/xff', '192.0.2.1, 10.0.0.1', '10.0.0.1'],
    ['/xffr', '192.0.2.1, 10.0.0.1', '192.0.2.1'],
    ['/xffr', '10.0.0.2, 10.0.0.1', '10.0.0.2'],
    ['/xffr', 'bogus, 10.0.0.1', '10.0.0.1'],
    ['/xffr', '192.0.2.1 ,, 10.1.1.1,,', '192.0.2.1'],
    ['/xff', '192.0.2.1:8000', '192.0.2.1'],
    ['/xff', '[2001:0db8:0:0:0:0:0:1]:443', '2001:db8::1'],
    ['/xff', '::FFFF:192.0.2.7', '::ffff:192.0.2.7'],
    ['/xff', '2001:db8::1:0:0:1', '2001:db8::1:0:0:1'],
    ['/xff', '0:0:0:0:0:0:0:1', '::1'],
  ];
  for (const [uri, xff, want] of cases) {
    assert.match(await body(`GET ${uri} HTTP/1.1\r\nX-Forwarded-For: ${xff}`), new RegExp(`^addr=${want.replace(/\./g, '\\.')} `), `${uri} ${xff}`);
  }
  assert.match(await body('GET /xff HTTP/1.1\r\nX-Forwarded-For: 192.0.2.1:8000'), /port=8000 /);
  // several headers: the last one; recursive goes on into the earlier ones
  assert.match(await body('GET /xff HTTP/1.1\r\nX-Forwarded-For: 192.0.2.1\r\nX-Forwarded-For: 10.0.0.5, 10.0.0.6'), /^addr=10\.0\.0\.6 /);
  assert.match(await body('GET /xffr HTTP/1.1\r\nX-Forwarded-For: 192.0.2.1\r\nX-Forwarded-For: 10.0.0.5, 10.0.0.6'), /^addr=192\.0\.2\.1 /);
});

test('other headers, untrusted clients, allow/deny and the error log', async () => {
  assert.match(await body('GET /custom HTTP/1.1\r\nX-Client-Address: 192.0.2.9'), /^addr=192\.0\.2\.9 /);
  assert.match(await body('GET /custom HTTP/1.1\r\nX-Client-Address: 192.0.2.9\r\nX-Client-Address: 192.0.2.10'), /^addr=192\.0\.2\.9 /);
  assert.match(await body('GET /untrusted HTTP/1.1\r\nX-Forwarded-For: 192.0.2.1'), /^addr=127\.0\.0\.1 /);
  const denied = await same(pair(), 'GET /deny HTTP/1.1\r\nX-Forwarded-For: 192.0.2.1');
  assert.equal(denied.status, 403);
  assert.equal((await same(pair(), 'GET /deny HTTP/1.1\r\nX-Forwarded-For: 192.0.2.2')).status, 200);
  for (const srv of [pair().gh, pair().ng]) {
    if (!srv) continue;
    await srv.waitForLog('error.log', /access forbidden by rule/);
    assert.ok(logMatches(srv, /access forbidden by rule/).some((l) => l.includes('client: 192.0.2.1, ')), 'log line names the real client');
  }
});

test('POST_READ with the server\'s settings; PREACCESS with the location\'s', async () => {
  const r = await same(pair(), 'GET / HTTP/1.1\r\nX-Real-IP: 192.0.2.1', 8081);
  assert.equal(r.status, 204);
  assert.equal(r.header('x-ip'), '192.0.2.1');
  // geo looks up the address realip found
  assert.equal(r.header('x-geo'), 'test');
  assert.equal((await same(pair(), 'GET / HTTP/1.1', 8081)).header('x-geo'), 'loopback');
  assert.match(await body('GET / HTTP/1.1\r\nX-Forwarded-For: 192.0.2.3', 8082), /^addr=192\.0\.2\.3 /);
  // a location's `return` answers in the rewrite phase, before realip's second chance
  assert.equal((await same(pair(), 'GET /ret HTTP/1.1\r\nX-Forwarded-For: 192.0.2.3', 8082)).body.toString(), '127.0.0.1\n');
});

test('a keepalive connection starts each request from the connection\'s address', async () => {
  const req = (extra: string) => `GET / HTTP/1.1\r\nHost: localhost${extra}\r\n\r\n`;
  const text = req('\r\nX-Real-IP: 192.0.2.1') + req('') + req('\r\nConnection: close');
  const bodies = [];
  for (const srv of [pair().gh, pair().ng]) {
    if (!srv) continue;
    const rs = parseResponses(await rawRequest(srv.port(8080), text));
    bodies.push(rs.map((r) => (r.header('x-show') ?? '').replace(/port=\d+/, 'port=N')));
  }
  assert.deepEqual(bodies[0].map((b) => b.split(' ')[0]), ['addr=192.0.2.1', 'addr=127.0.0.1', 'addr=127.0.0.1']);
  if (bodies[1]) assert.deepEqual(bodies[0], bodies[1]);
});

test('real_ip_header proxy_protocol: address and port from the PROXY header', async () => {
  const pp = 'PROXY TCP4 192.0.2.1 192.0.2.2 1234 5678\r\n';
  assert.match(await body(`${pp}GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`, 8083), /^addr=192\.0\.2\.1 port=1234 real=127\.0\.0\.1$/);
  assert.match(await body(`${pp}GET /pp-untrusted HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`, 8083), /^addr=127\.0\.0\.1 /);
  const pp6 = 'PROXY TCP6 2001:db8::5 2001:db8::6 4321 80\r\n';
  assert.match(await body(`${pp6}GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`, 8083), /^addr=2001:db8::5 port=4321 real=127\.0\.0\.1$/);
});

test('configuration messages are nginx\'s', async () => {
  for (const body of [
    'set_real_ip_from 10.0.0.1/8;',
    'set_real_ip_from unix:;',
    'set_real_ip_from localhost;',
    'set_real_ip_from 10.0.0.0/33;',
    'real_ip_header X-Real-IP; real_ip_header X-Forwarded-For;',
    'real_ip_recursive maybe;',
    'real_ip_recursive on; real_ip_recursive off;',
    'server { location / { if ($args) { set_real_ip_from 10.0.0.0/8; } } }',
  ]) {
    await sameCheck(httpConf(`    ${body}`));
  }
});
