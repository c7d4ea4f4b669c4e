/**
 * ngx_http_secure_link_module: $secure_link and $secure_link_expires for
 * hashes right, wrong, padded, too long, badly encoded, expired, with a bad
 * time, and the older secure_link_secret form, inherited or not.
 * Reference: Debian's nginx 1.22.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { same, sharedPair } from './locations-kit.ts';

const conf = `
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /new/ {
            secure_link $arg_h,$arg_e;
            secure_link_md5 "$secure_link_expires$uri key";
            return 200 "[$secure_link] [$secure_link_expires]\\n";
        }
        location /plain/ {
            secure_link $arg_h;
            secure_link_md5 "$uri key";
            return 200 "[$secure_link] [$secure_link_expires]\\n";
        }
        location /old/ {
            secure_link_secret word;
            return 200 "[$secure_link]\\n";
        }
        location /none/ { return 200 "[$secure_link]\\n"; }
    }
}
`;

const pair = sharedPair({ conf });

const b64url = (text: string) => crypto.createHash('md5').update(text).digest('base64url');
const hex = (text: string) => crypto.createHash('md5').update(text).digest('hex');

async function body(uri: string): Promise<string> {
  return (await same(pair(), `GET ${uri} HTTP/1.0`)).body.toString();
}

test('hash and expiry', async () => {
  const future = Math.floor(Date.now() / 1000) + 3600;
  const past = Math.floor(Date.now() / 1000) - 3600;
  assert.equal(await body(`/plain/a?h=${b64url('/plain/a key')}`), '[1] []\n');
  assert.equal(await body(`/plain/a?h=${b64url('/plain/a key')}==`), '[1] []\n');
  assert.equal(await body(`/plain/a?h=${b64url('/plain/b key')}`), '[] []\n');
  assert.equal(await body(`/plain/a?h=${b64url('/plain/a key')}AA`), '[] []\n');
  assert.equal(await body('/plain/a?h=not*base64'), '[] []\n');
  assert.equal(await body('/plain/a'), '[] []\n');
  assert.equal(await body(`/new/x?h=${b64url(`${future}/new/x key`)}&e=${future}`), `[1] [${future}]\n`);
  assert.equal(await body(`/new/x?h=${b64url(`${past}/new/x key`)}&e=${past}`), `[0] [${past}]\n`);
  assert.equal(await body(`/new/x?h=${b64url('0/new/x key')}&e=0`), '[] []\n');
  assert.equal(await body(`/new/x?h=${b64url('/new/x key')}&e=12x`), '[] []\n');
});

test('the older form with secure_link_secret', async () => {
  assert.equal(await body(`/old/${hex('file.txt?a=1word')}/file.txt?a=1`), '[file.txt?a=1]\n');
  assert.equal(await body(`/old/${hex('other')}/file.txt`), '[]\n');
  assert.equal(await body(`/old/${hex('file.txtword').toUpperCase()}/file.txt`), '[file.txt]\n');
  assert.equal(await body('/old/short/file.txt'), '[]\n');
  assert.equal(await body(`/old/${hex('word')}/`), '[]\n');
  assert.equal(await body('/none/x'), '[]\n');
});
