/**
 * ngx_http_random_index_module: the one file a directory has (a link to a
 * file counts, dot-files and directories do not), both of two files over
 * many requests, a directory with none falls to index, a missing one is
 * 404. Reference: Debian's nginx 1.22.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { ask, same, sharedPair } from './locations-kit.ts';

const conf = `
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        root %%PREFIX%%/html;
        location / { random_index on; }
        location /plain/ { }
    }
}
`;

const files = {
  'html/one/.hidden': 'hidden\n',
  'html/one/sub/index.html': 'sub\n',
  'html/two/a.txt': 'a\n',
  'html/two/b.txt': 'b\n',
  'html/target.txt': 'linked\n',
  'html/empty/index.html': 'index\n',
  'html/empty/.dot': 'dot\n',
  'html/plain/index.html': 'plain\n',
  'html/nothing/.dot': 'dot\n',
  'html/nothing/dir/x': 'x\n',
};

const pair = sharedPair({ conf, files });

test('the only file, through a link; dot-files and directories are not picked', async () => {
  for (const srv of [pair().gh, pair().ng]) {
    if (srv && !fs.existsSync(srv.path('html/one/link'))) fs.symlinkSync(srv.path('html/target.txt'), srv.path('html/one/link'));
  }
  assert.equal((await same(pair(), 'GET /one/ HTTP/1.0')).body.toString(), 'linked\n');
  // index.html is a file like any other; /one/sub/ has one too
  assert.equal((await same(pair(), 'GET /empty/ HTTP/1.0')).body.toString(), 'index\n');
  assert.equal((await same(pair(), 'GET /one/sub/ HTTP/1.0')).body.toString(), 'sub\n');
  assert.equal((await same(pair(), 'GET /missing/ HTTP/1.0')).status, 404);
  // no file to pick: index and then the core's 403 for a directory
  assert.equal((await same(pair(), 'GET /nothing/ HTTP/1.0')).status, 403);
  assert.equal((await same(pair(), 'GET /plain/ HTTP/1.0')).body.toString(), 'plain\n');
});

test('either of two files (Gatehouse alone: the servers pick independently)', async () => {
  const seen = new Set<string>();
  // 1 chance in 2^39 that 40 picks are all alike
  for (let i = 0; i < 40 && seen.size < 2; i++) seen.add((await ask(pair().gh, 'GET /two/ HTTP/1.0')).body.toString());
  assert.deepEqual([...seen].sort(), ['a\n', 'b\n']);
});
