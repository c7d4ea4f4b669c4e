/**
 * disable_symlinks off | on | if_not_owner [from=]: the same tree of files
 * and symbolic links (one link owned by another user) in Gatehouse's prefix
 * and Debian's nginx's, the same requests, the same statuses and bodies and
 * the same error log lines.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import type { RunningServer } from '../kit/server.ts';
import { ask, comparable, startPair } from './static-kit.ts';
import { binaries, confTest, logged } from './limit-kit.ts';

const conf = `
events {}
http {
    server_tokens off;
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        location /off/ { }
        location /on/ { disable_symlinks on; }
        location /owner/ { disable_symlinks if_not_owner; }
        location /try/ { disable_symlinks on; try_files $uri $uri.html =404; }
        location /cond/ { disable_symlinks on; if (-f $request_filename) { return 204; } }
        location /from/ { alias %%PREFIX%%/html/dirlink/; disable_symlinks on from=$document_root; }
        location /nofrom/ { alias %%PREFIX%%/html/dirlink/; disable_symlinks on; }
        location /idx/ { disable_symlinks on; }
    }
}
`;

const files = {
  'html/real.txt': 'REAL', 'html/dir/inner.txt': 'INNER', 'html/off/target.txt': 'OFF', 'html/on/target.txt': 'ON',
  'html/owner/target.txt': 'OWNER', 'html/try/page.html': 'TRY PAGE', 'html/cond/target.txt': 'COND',
  'html/idx/page.html': 'INDEX',
};

/** The links: to a file beside them, and one owned by nobody (its target is root's). */
function makeLinks(srv: RunningServer): void {
  const at = (p: string) => srv.path(`html/${p}`);
  for (const d of ['off', 'on', 'owner', 'cond']) fs.symlinkSync('target.txt', at(`${d}/link`));
  fs.symlinkSync('target.txt', at('owner/foreign'));
  fs.lchownSync(at('owner/foreign'), 65534, 65534);
  fs.symlinkSync('page.html', at('try/page'));
  fs.symlinkSync('dir', at('dirlink'));
  fs.symlinkSync('page.html', at('idx/index.html'));
}

test('disable_symlinks refuses links as nginx does', async (t) => {
  const pair = await startPair(t, { conf, files });
  for (const srv of [pair.gh, pair.ng]) if (srv) makeLinks(srv);
  const expected: Array<[string, number]> = [
    ['/off/link', 200], ['/on/target.txt', 200], ['/on/link', 403], ['/owner/link', 200], ['/owner/foreign', 403],
    ['/try/page', 200], ['/cond/link', 403], ['/cond/target.txt', 204], ['/from/inner.txt', 200], ['/nofrom/inner.txt', 404], ['/idx/', 403],
  ];
  for (const [uri, status] of expected) {
    const request = `GET ${uri} HTTP/1.0\r\nHost: localhost\r\n\r\n`;
    const mine = await ask(pair.gh, request);
    assert.equal(mine.status, status, uri);
    if (uri === '/try/page') assert.equal(mine.body.toString(), 'TRY PAGE', 'try_files went on to $uri.html');
    if (pair.ng) assert.deepEqual(comparable(mine), comparable(await ask(pair.ng, request)), `same answer as nginx for ${uri}`);
  }
  if (pair.ng) {
    const why = /\[(error|crit)\]/;
    const mask = (srv: RunningServer) => logged(srv, why).map((l) => l.replace(/\/tmp\/gh-test-\w+/g, 'PREFIX').replace(/, client: .*$/, ''));
    assert.deepEqual(mask(pair.gh), mask(pair.ng), 'the same error log lines');
  }
});

test('disable_symlinks, post_action and the memcached directives refuse what nginx refuses, with its messages', () => {
  const all = binaries();
  const conf = (d: string) => `events {} http { upstream u { server 127.0.0.1:1; } server { listen 127.0.0.1:1; location / { ${d} } } }`;
  const refused = ['disable_symlinks maybe;', 'disable_symlinks from=/x;', 'disable_symlinks off from=/x;', 'disable_symlinks on off;',
    'disable_symlinks on; disable_symlinks off;', 'post_action;', 'post_action /a /b;',
    'memcached_pass u; memcached_next_upstream http_500;', 'memcached_gzip_flag x;', 'memcached_pass u; memcached_pass u;',
    'memcached_buffering off;', 'memcached_pass u; memcached_read_timeout x;'];
  for (const d of refused) {
    const mine = confTest(all[0][1], conf(d));
    assert.equal(mine.length, 1, `${d}: ${mine.join(' | ')}`);
    if (all.length === 2) assert.deepEqual(mine, confTest(all[1][1], conf(d)), d);
  }
  const accepted = 'disable_symlinks if_not_owner from=$document_root; post_action @after; set $memcached_key $uri; memcached_pass u; '
    + 'memcached_next_upstream error timeout invalid_response not_found; memcached_gzip_flag 2; memcached_connect_timeout 1s;';
  for (const [name, bin] of all) assert.deepEqual(confTest(bin, conf(accepted).replace('location / {', 'location @after { return 204; } location / {')), [], name);
});
