/**
 * WebDAV: the same requests in the same order to Gatehouse and Debian's
 * nginx 1.22, each on its own copy of one tree; every answer (status and
 * headers in order) and the tree after each step must match, and so must
 * the error log lines that say why a request was refused.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { RunningServer } from '../kit/server.ts';
import { ask, comparable, startPair } from './static-kit.ts';
import { binaries, confTest, logged } from './limit-kit.ts';

const conf = `
events {}
http {
    server_tokens off;
    access_log off;
    client_body_temp_path %%PREFIX%%/body_temp;
    client_body_buffer_size 1k;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        location / { dav_methods PUT DELETE MKCOL COPY MOVE; dav_access user:rw group:r all:r; }
        location /full/ { dav_methods put; create_full_put_path on; dav_access group:rw all:r; }
        location /min/ { dav_methods DELETE; min_delete_depth 3; }
        location /i/ { alias %%PREFIX%%/html/aliased/; dav_methods PUT COPY MOVE; }
        location /ro/ { dav_methods off; }
    }
}
`;

const files = {
  'html/a.txt': 'alpha', 'html/tree/one': 'one', 'html/tree/sub/two': 'two', 'html/min/x/y/z': 'deep', 'html/min/top': 't',
  'html/aliased/in': 'inside', 'html/ro/file': 'ro', 'html/ex/old': 'old',
};

const req = (method: string, uri: string, headers: string[] = [], body = '') =>
  `${method} ${uri} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n${headers.map((h) => `${h}\r\n`).join('')}`
  + `${body || method === 'PUT' ? `Content-Length: ${Buffer.byteLength(body, 'latin1')}\r\n` : ''}\r\n${body}`;

const steps: string[] = [
  req('PUT', '/new.txt', [], 'hello'),
  req('PUT', '/new.txt', [], 'replaced!'),
  req('PUT', '/big.bin', [], 'b'.repeat(5000)),
  req('PUT', '/sp%20ace', [], 'x'),
  req('PUT', '/dated', ['Date: Thu, 01 Jan 2015 00:00:00 GMT'], 'd'),
  req('PUT', '/col/', [], 'x'),
  req('PUT', '/tree', [], 'x'),
  req('PUT', '/range', ['Content-Range: bytes 0-1/4'], 'xx'),
  req('PUT', '/nope/deeper/f', [], 'x'),
  req('PUT', '/full/p/q/r', [], 'made'),
  req('PUT', '/i/via-alias', [], 'aliased'),
  req('MKCOL', '/newdir/'),
  req('MKCOL', '/newdir/'),
  req('MKCOL', '/nodir'),
  req('MKCOL', '/missing/child/'),
  req('MKCOL', '/withbody/', [], 'body'),
  req('COPY', '/a.txt', ['Destination: /a-copy.txt']),
  req('COPY', '/a.txt', ['Destination: http://localhost/a-copy2.txt', 'Overwrite: T']),
  req('COPY', '/a.txt', ['Destination: /a-copy.txt', 'Overwrite: F']),
  req('COPY', '/a.txt', ['Destination: /a-copy.txt', 'Overwrite: maybe']),
  req('COPY', '/a.txt', ['Destination: http://elsewhere/a']),
  req('COPY', '/a.txt', ['Destination: ftp://localhost/a']),
  req('COPY', '/a.txt', ['Destination: http://localhost']),
  req('COPY', '/a.txt'),
  req('COPY', '/a.txt', ['Destination: /../etc/passwd']),
  req('COPY', '/a.txt', ['Destination: /tree/']),
  req('COPY', '/a.txt', ['Destination: /tree']),
  req('COPY', '/a.txt', ['Destination: /x', 'Depth: 1']),
  req('COPY', '/tree/', ['Destination: /tree-copy/']),
  req('COPY', '/tree/', ['Destination: /ex/']),
  req('COPY', '/gone', ['Destination: /gone2']),
  req('MOVE', '/a-copy.txt', ['Destination: /moved/deeper/a.txt']),
  req('MOVE', '/tree-copy/', ['Destination: /tree-moved/']),
  req('MOVE', '/tree-moved/', ['Destination: /tree-moved2/', 'Depth: 0']),
  req('MOVE', '/i/in', ['Destination: /i/in2']),
  req('MOVE', '/i/in2', ['Destination: /x']),
  req('DELETE', '/new.txt'),
  req('DELETE', '/new.txt'),
  req('DELETE', '/tree-moved'),
  req('DELETE', '/tree-moved/', ['Depth: 1']),
  req('DELETE', '/tree-moved/'),
  req('DELETE', '/a.txt/'),
  req('DELETE', '/big.bin', ['Depth: bogus']),
  req('DELETE', '/big.bin', [], 'body'),
  req('DELETE', '/min/top'),
  req('DELETE', '/min/x/y/z'),
  req('PUT', '/min/put', [], 'x'),
  req('PUT', '/ro/file', [], 'x'),
  req('DELETE', '/ro/file'),
  req('OPTIONS', '/a.txt'),
];

/** The tree under html/: each file with its content and access bits, each directory with its bits. */
function treeOf(srv: RunningServer): string[] {
  const root = srv.path('html');
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of fs.readdirSync(dir).sort()) {
      const full = path.join(dir, name);
      const st = fs.lstatSync(full);
      const rel = path.relative(root, full);
      if (st.isDirectory()) {
        out.push(`${rel}/ ${(st.mode & 0o777).toString(8)}`);
        walk(full);
      } else out.push(`${rel} ${(st.mode & 0o777).toString(8)} ${fs.readFileSync(full, 'latin1').slice(0, 20)}`);
    }
  };
  walk(root);
  return out;
}

test('PUT, DELETE, MKCOL, COPY and MOVE answer and change the tree as nginx does', async (t) => {
  const pair = await startPair(t, { conf, files });
  const servers = [pair.gh, pair.ng].filter((s) => s !== undefined);
  // nginx's workers run as nobody: the tree and the temp path must be theirs to write
  for (const srv of servers) {
    fs.mkdirSync(srv.path('body_temp'), { recursive: true });
    for (const dir of ['html', 'body_temp']) {
      fs.chmodSync(srv.path(dir), 0o777);
      for (const f of fs.readdirSync(srv.path(dir), { recursive: true }) as string[]) {
        const full = path.join(srv.path(dir), f);
        if (fs.statSync(full).isDirectory()) fs.chmodSync(full, 0o777);
      }
    }
  }
  const oldMode = process.umask(0o022);
  t.after(() => process.umask(oldMode));
  for (const step of steps) {
    const answers = [];
    for (const srv of servers) answers.push({ r: comparable(await ask(srv, step)), tree: treeOf(srv) });
    const line = step.split('\r\n')[0];
    if (answers.length === 2) {
      assert.deepEqual(answers[0].r, answers[1].r, `same answer as nginx for ${line}`);
      assert.deepEqual(answers[0].tree, answers[1].tree, `same tree as nginx after ${line}`);
    }
  }
  if (pair.ng) {
    const why = /\[(error|crit)\].*(PUT|DELETE|MKCOL|COPY|MOVE|Depth|Destination|Overwrite|collection|could not|failed)/;
    const mask = (lines: string[]) => lines.map((l) => l.replace(/\/tmp\/gh-test-\w+/g, 'PREFIX').replace(/, client: .*$/, '').replace(/body_temp\/\d+/, 'body_temp/N'));
    assert.deepEqual(mask(logged(pair.gh, why)), mask(logged(pair.ng, why)), 'the same error log lines');
  }
  // nginx 1.31's checks (1.22 truncates a file copied onto itself, and copies a tree into itself)
  for (const [step, why] of [[req('COPY', '/a.txt', ['Destination: /a.txt']), 'point to the same location'],
    [req('COPY', '/tree/', ['Destination: /tree/sub/inside/']), 'could not be COPYed to collection "/tree/sub/inside/"']]) {
    assert.equal((await ask(pair.gh, step)).status, 403, step);
    assert.equal(logged(pair.gh, new RegExp(why)).length, 1, why);
  }
  const gh = treeOf(pair.gh);
  assert.ok(gh.includes('full/p/q/r 664 made'), 'create_full_put_path with dav_access');
  assert.ok(gh.includes('sp ace 644 x'), 'escaped URI unescaped on disk');
  assert.ok(gh.some((l) => l.startsWith('moved/deeper/a.txt ')), 'MOVE of a file makes the path');
  const dated = fs.statSync(pair.gh.path('html/dated'));
  assert.equal(dated.mtime.toISOString(), '2015-01-01T00:00:00.000Z', 'PUT keeps the Date header as mtime');
  assert.deepEqual(fs.readdirSync(pair.gh.path('body_temp')), [], 'no temporary file left behind');
});

test('the dav directives refuse what nginx refuses, with its messages', () => {
  for (const [name, bin] of binaries()) {
    const errs = (d: string) => confTest(bin, `events {} http { server { listen 127.0.0.1:1; location / { ${d} } } }`);
    for (const d of ['dav_methods PUT PROPFIND;', 'dav_access user:rwx;', 'dav_access nobody:r;', 'min_delete_depth x;',
      'create_full_put_path maybe;', 'dav_access user:rw group:r all:r extra:r;']) {
      const [mine] = errs(d);
      assert.ok(mine, `${name}: ${d} refused`);
      if (name === 'gatehouse' && binaries().length === 2) assert.equal(mine, confTest(binaries()[1][1], `events {} http { server { listen 127.0.0.1:1; location / { ${d} } } }`)[0], d);
    }
    assert.deepEqual(errs('dav_methods put; dav_methods DELETE; dav_access group:rw all:r; min_delete_depth 2; create_full_put_path on;'), [], name);
  }
});
