/**
 * ngx_http_userid_filter_module: the cookie's bytes (v2 in network order
 * with the server address or userid_service, v1 in host order, the
 * sequence each starts from), $uid_got/$uid_set as nginx prints them, the
 * mark added to a cookie that lacks it, $uid_reset, and the attributes.
 * Every check runs on Gatehouse and on Debian's nginx 1.22, each freshly
 * started so their sequences start alike.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nginxSkip, startGatehouse, startNginx } from '../kit/server.ts';
import { httpGet } from '../kit/client.ts';

const conf = `
events {}
http {
    access_log off;
    map $arg_reset $uid_reset { default 0; yes 1; }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        root %%PREFIX%%/html;
        add_header X-Got $uid_got;
        add_header X-Set $uid_set;
        userid on;
        location /v2/ { }
        location /service/ { userid_service 65534; }
        location /v1/ { userid v1; userid_service 7; userid_mark t; }
        location /marked/ {
            userid_mark x;
            userid_name sid;
            userid_domain example.test;
            userid_path /marked/;
            userid_expires max;
            userid_flags httponly secure samesite=lax;
            userid_p3p 'CP="NOI"';
        }
        location /log/ { userid log; }
    }
}
`;

const files = { 'html/v2/i': '', 'html/service/i': '', 'html/v1/i': '', 'html/marked/i': '', 'html/log/i': '' };

function cookieBytes(setCookie: string | undefined, name = 'uid'): Buffer {
  const m = new RegExp(`^${name}=([A-Za-z0-9+/]{22})`).exec(setCookie ?? '');
  assert.ok(m, `a ${name} cookie in ${setCookie}`);
  return Buffer.from(m[1], 'base64');
}

for (const [name, start, skip] of [['gatehouse', startGatehouse, false], ['nginx', startNginx, nginxSkip]] as const) {
  test(`the identifier's bytes and variables (${name})`, { skip }, async (t) => {
    const srv = await start({ conf, files });
    t.after(() => srv.stop());
    const port = srv.port(8080);

    // v2 with the service number: network order; the first identifier of the worker has sequence 0x03030302
    const s = await httpGet(port, '/service/i');
    const b = cookieBytes(s.header('set-cookie'));
    assert.deepEqual([...b.subarray(0, 4)], [0, 0, 0xff, 0xfe]);
    assert.deepEqual([...b.subarray(12)], [3, 3, 3, 2]);
    const now = Math.floor(Date.now() / 1000);
    assert.ok(Math.abs(b.readUInt32BE(4) - now) < 30);
    // the variable prints each word as a little-endian host reads it
    const words = [0, 1, 2, 3].map((i) => b.readUInt32LE(i * 4).toString(16).toUpperCase().padStart(8, '0')).join('');
    assert.equal(s.header('x-set'), `uid=${words}`);
    assert.match(s.header('set-cookie') ?? '', /^uid=[A-Za-z0-9+/]{22}==; path=\/$/);

    // v2 without a service: the server's address; the sequence went up by 0x100
    const v2 = cookieBytes((await httpGet(port, '/v2/i')).header('set-cookie'));
    assert.deepEqual([...v2.subarray(0, 4)], [127, 0, 0, 1]);
    assert.deepEqual([...v2.subarray(12)], [3, 3, 4, 2]);

    // v1: host order, its own sequence from 1, and the mark in place of the first '='
    const one = await httpGet(port, '/v1/i');
    assert.match(one.header('set-cookie') ?? '', /^uid=[A-Za-z0-9+/]{22}t=; path=\/$/);
    const v1 = cookieBytes(one.header('set-cookie'));
    assert.equal(v1.readUInt32LE(0), 7);
    assert.equal(v1.readUInt32LE(12), 1);

    // a cookie sent back: $uid_got, nothing set; with a mark configured it is sent again, marked
    const sent = 'uid=' + Buffer.from('000102030405060708090a0b0c0d0e0f', 'hex').toString('base64');
    const back = await httpGet(port, '/v2/i', { Cookie: sent });
    assert.equal(back.header('x-got'), 'uid=03020100070605040B0A09080F0E0D0C');
    assert.equal(back.header('set-cookie'), undefined);
    assert.equal(back.header('x-set'), undefined);
    const again = await httpGet(port, '/marked/i', { Cookie: 'sid=AAECAwQFBgcICQoLDA0ODw==' });
    assert.equal(again.header('set-cookie'),
      'sid=AAECAwQFBgcICQoLDA0ODwx=; expires=Thu, 31-Dec-37 23:55:55 GMT; domain=example.test; path=/marked/; secure; httponly; samesite=lax');
    assert.equal(again.header('p3p'), 'CP="NOI"');
    assert.equal(again.header('x-set'), 'sid=03020100070605040B0A09080F0E0D0C');

    // $uid_reset: a new identifier replaces the one sent
    const reset = await httpGet(port, '/v2/i?reset=yes', { Cookie: sent });
    assert.notEqual(reset.header('x-set'), 'uid=03020100070605040B0A09080F0E0D0C');
    assert.match(reset.header('set-cookie') ?? '', /^uid=/);

    // log: read, never set; too short a cookie is not one
    const log = await httpGet(port, '/log/i', { Cookie: sent });
    assert.equal(log.header('set-cookie'), undefined);
    assert.equal(log.header('x-got'), 'uid=03020100070605040B0A09080F0E0D0C');
    assert.equal((await httpGet(port, '/log/i', { Cookie: 'uid=short' })).header('x-got'), undefined);
  });
}
