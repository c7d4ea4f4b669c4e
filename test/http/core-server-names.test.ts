/**
 * Virtual servers: server_name forms and nginx's order of choice (exact,
 * leading wildcard, trailing wildcard, regexes in order), regex captures,
 * $server_name, default_server, and listen addresses (a specific address
 * beside a wildcard one on the same port, IPv6, unix sockets) with
 * $server_addr/$server_port. Reference test against Debian's nginx.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { exchange, same, sharedPair } from './core-kit.ts';
import { rawRequest } from '../kit/client.ts';

const show = 'return 200 "$server_name|$host|$1|$name\\n";';
const pair = sharedPair({
  conf: `
events {}
http {
    access_log off;
    server { listen 127.0.0.1:%%PORT_8080%%; server_name localhost; ${show} }
    server { listen 127.0.0.1:%%PORT_8080%%; server_name ""; ${show} }
    server { listen 127.0.0.1:%%PORT_8080%%; server_name www.example.com; ${show} }
    server { listen 127.0.0.1:%%PORT_8080%%; server_name ~^EXAMPLE\\.COM$; ${show} }
    server { listen 127.0.0.1:%%PORT_8080%%; server_name ~^(?P<name>[a-z]+)\\.example\\.com$; ${show} }
    server { listen 127.0.0.1:%%PORT_8080%%; server_name ~^(www\\d+)\\.example\\.com$; ${show} }
    server { listen 127.0.0.1:%%PORT_8080%%; server_name Many.example.com many2.example.com; ${show} }
    server { listen 127.0.0.1:%%PORT_8080%%; server_name *.wc.example.com; ${show} }
    server { listen 127.0.0.1:%%PORT_8080%%; server_name *.pref.wc.example.com; ${show} }
    server { listen 127.0.0.1:%%PORT_8080%%; server_name wc2.example.*; ${show} }
    server { listen 127.0.0.1:%%PORT_8080%%; server_name wc2.example.com.*; ${show} }
    server { listen 127.0.0.1:%%PORT_8080%%; server_name .dot.example.com; ${show} }
    server { listen 127.0.0.1:%%PORT_8080%%; server_name www.example.com; return 200 "second\\n"; }

    server { listen %%PORT_8081%%; server_name wild; return 200 "wild $server_addr:$server_port $server_name\\n"; }
    server { listen 127.0.0.1:%%PORT_8081%%; server_name specific; return 200 "specific $server_addr:$server_port\\n"; }
    server { listen 127.0.0.1:%%PORT_8081%% default_server; server_name other; return 200 "other\\n"; }
    server { listen [::1]:%%PORT_8082%%; return 200 "v6 $server_addr $remote_addr $binary_remote_addr\\n"; }
    server {
        listen 127.0.0.1:%%PORT_8083%% proxy_protocol;
        return 200 "[$proxy_protocol_addr:$proxy_protocol_port $proxy_protocol_server_addr:$proxy_protocol_server_port] $remote_addr\n";
    }
    server { listen unix:%%PREFIX%%/http.sock; return 200 "unix $server_addr $remote_addr [$remote_port] [$server_port]\\n"; }
}
`,
});

const hosts = ['', 'xxx', 'localhost', 'www.example.com', 'WWW.EXAMPLE.COM', 'example.com', 'blah.example.com', 'BLAH.EXAMPLE.COM',
  'www01.example.com', 'many.example.com', 'many2.example.com', 'www.wc.example.com', 'a.b.wc.example.com', 'wc.example.com',
  'www.pref.wc.example.com', 'wc2.example.net', 'wc2.example.com.pref', 'wc2.example', 'www.dot.example.com', 'dot.example.com',
  'xdot.example.com'];

for (const host of hosts) {
  test(`server_name for Host "${host}"`, async () => {
    const answer = await same(pair(), `GET / HTTP/1.0\r\n${host ? `Host: ${host}\r\n` : ''}\r\n`);
    assert.match(answer.text, /^HTTP\/1\.1 200 OK/);
  });
}

test('server_name choices (checked on Gatehouse alone)', async () => {
  const body = async (host: string | undefined) => {
    const r = await exchange(pair().gh, `GET / HTTP/1.0\r\n${host === undefined ? '' : `Host: ${host}\r\n`}\r\n`);
    return r.text.slice(r.text.indexOf('\r\n\r\n') + 4);
  };
  assert.equal(await body('xxx'), 'localhost|xxx||\n');
  assert.equal(await body(undefined), '|||\n');
  assert.equal(await body('WWW.EXAMPLE.COM'), 'www.example.com|www.example.com||\n');
  assert.equal(await body('EXAMPLE.COM'), '~^EXAMPLE\\.COM$|example.com||\n');
  assert.equal(await body('BLAH.EXAMPLE.COM'), '~^(?P<name>[a-z]+)\\.example\\.com$|blah.example.com|blah|blah\n');
  assert.equal(await body('www01.example.com'), '~^(www\\d+)\\.example\\.com$|www01.example.com|www01|\n');
  assert.equal(await body('many2.example.com'), 'many.example.com|many2.example.com||\n');
  assert.equal(await body('www.pref.wc.example.com'), '*.pref.wc.example.com|www.pref.wc.example.com||\n');
  assert.equal(await body('wc2.example.com.pref'), 'wc2.example.com.*|wc2.example.com.pref||\n');
  assert.equal(await body('dot.example.com'), 'dot.example.com|dot.example.com||\n');
});

test('a specific address beside a wildcard one on the same port', async () => {
  const specific = await same(pair(), 'GET / HTTP/1.0\r\nHost: wild\r\n\r\n', 3000, 8081);
  assert.match(specific.text, /\r\n\r\nother\n$/);
  for (const srv of [pair().gh, pair().ng]) {
    if (!srv) continue;
    const wild = (await rawRequest(srv.port(8081), 'GET / HTTP/1.0\r\nHost: specific\r\n\r\n', { host: '127.0.0.2' })).toString();
    assert.match(wild, new RegExp(`\\r\\n\\r\\nwild 127\\.0\\.0\\.2:${srv.port(8081)} wild\\n$`));
  }
});

test('IPv6 and unix socket listeners', async () => {
  for (const srv of [pair().gh, pair().ng]) {
    if (!srv) continue;
    const v6 = (await rawRequest(srv.port(8082), 'GET / HTTP/1.0\r\n\r\n', { host: '::1' })).toString('latin1');
    assert.match(v6, /\r\n\r\nv6 ::1 ::1 \x00{15}\x01\n$/);
    const unix = (await rawRequest(srv.path('http.sock'), 'GET / HTTP/1.0\r\n\r\n')).toString('latin1');
    assert.match(unix, new RegExp(`\\r\\n\\r\\nunix unix:${srv.path('http.sock')} unix: \\[\\] \\[\\]\\n$`));
  }
});

test('listen … proxy_protocol: the PROXY header first, its addresses as variables', async () => {
  const v1 = await same(pair(), 'PROXY TCP4 127.0.0.7 127.0.0.8 1234 80\r\nGET / HTTP/1.0\r\n\r\n', 3000, 8083);
  assert.match(v1.text, /\r\n\r\n\[127\.0\.0\.7:1234 127\.0\.0\.8:80\] 127\.0\.0\.1\n$/);
  const unknown = await same(pair(), 'PROXY UNKNOWN\r\nGET / HTTP/1.0\r\n\r\n', 3000, 8083);
  assert.match(unknown.text, /\r\n\r\n\[: :\] 127\.0\.0\.1\n$/);
  assert.deepEqual(await same(pair(), 'GET / HTTP/1.0\r\n\r\n', 3000, 8083), { text: '', end: 'close' });
  assert.match(pair().gh.logLines().join('\n'), /\[error\] .*broken header: "GET \/ HTTP\/1\.0/);
});
