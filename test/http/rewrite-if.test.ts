/**
 * `if`: every condition form (as nginx-tests' rewrite_if.t), regex captures
 * inside `if`, and `if` blocks as anonymous locations with their own level
 * (add_header inside `if` replaces the location's, server-level `if` runs
 * before a location is chosen). Reference: Debian's nginx 1.22 on the same
 * configuration.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { same, sharedPair } from './locations-kit.ts';

const conf = `
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;

        if ($http_x_server_if = yes) { return 200 "server if\\n"; }

        location /var { if ($arg_c) { return 204; } }
        location /sp { if ( $arg_c ) { return 204; } }
        location /eq { if ($arg_c = "a b") { return 204; } }
        location /ne { if ($arg_c != 2) { return 204; } }
        location /pos { if ($arg_c ~ foo) { return 204; } }
        location /cpos { if ($arg_c ~* foo) { return 204; } }
        location /neg { if ($arg_c !~ foo) { return 204; } }
        location /cneg { if ($arg_c !~* foo) { return 204; } }
        location /f { if (-f %%PREFIX%%/$arg_c) { return 204; } }
        location /nf { if (!-f %%PREFIX%%/$arg_c) { return 204; } }
        location /d { if (-d %%PREFIX%%/$arg_c) { return 204; } }
        location /nd { if (!-d %%PREFIX%%/$arg_c) { return 204; } }
        location /e { if (-e %%PREFIX%%/$arg_c) { return 204; } }
        location /ne2 { if (!-e %%PREFIX%%/$arg_c) { return 204; } }
        location /x { if (-x %%PREFIX%%/$arg_c) { return 204; } }
        location /nx { if (!-x %%PREFIX%%/$arg_c) { return 204; } }

        location /caps {
            if ($arg_v ~ ^(?<word>[a-z]+)-(\\d+)$) { return 200 "$1 $2 $word\\n"; }
            return 200 "no match [$1]\\n";
        }

        location /hdr {
            add_header X-Outer outer;
            if ($arg_inner) { add_header X-Inner inner; }
            if ($arg_none) { set $x 1; }
            return 200 "hdr\\n";
        }
        location /ifproxy {
            set $t 1;
            if ($t) { proxy_pass http://127.0.0.1:%%PORT_8081%%; }
            if ($arg_second) { add_header X-Second 1; }
        }
        location /seq {
            set $r "";
            if ($arg_a) { set $r "\${r}a"; }
            if ($arg_b) { set $r "\${r}b"; }
            return 200 "seq=$r\\n";
        }
    }
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        return 200 "backend $uri\\n";
    }
}
`;

// the kit writes files 0644: -x is false for the file and true for the directory
const pair = sharedPair({ conf, files: { file: 'plain\n', 'dir/keep': '' } });

const status = async (req: string) => (await same(pair(), `GET ${req} HTTP/1.1`)).status;

test('conditions match nginx (rewrite_if.t)', async () => {
  const holds: Array<[string, boolean]> = [
    ['/var?c=1', true], ['/var?c=0', false], ['/var', false], ['/sp?c=1', true],
    ['/eq?c=a%20b', false], ['/eq?c=x', false], ['/ne?c=1', true], ['/ne?c=2', false],
    ['/pos?c=food', true], ['/pos?c=FooD', false], ['/cpos?c=FooD', true], ['/cpos?c=bar', false],
    ['/neg?c=FooD', true], ['/neg?c=food', false], ['/cneg?c=bar', true], ['/cneg?c=FooD', false],
    ['/f?c=file', true], ['/f?c=dir', false], ['/nf?c=file', false], ['/nf?c=dir', true],
    ['/d?c=dir', true], ['/d?c=file', false], ['/nd?c=file', true], ['/nd?c=dir', false],
    ['/e?c=file', true], ['/e?c=dir', true], ['/e?c=nx', false], ['/ne2?c=nx', true], ['/ne2?c=file', false],
    ['/x?c=file', false], ['/x?c=dir', true], ['/nx?c=file', true], ['/nx?c=dir', false],
  ];
  for (const [req, yes] of holds) assert.equal(await status(req), yes ? 204 : 404, req);
});

test('regex captures inside if and server-level if', async () => {
  assert.equal((await same(pair(), 'GET /caps?v=abc-12 HTTP/1.1')).body.toString(), 'abc 12 abc\n');
  assert.equal((await same(pair(), 'GET /caps?v=ABC HTTP/1.1')).body.toString(), 'no match []\n');
  const r = await same(pair(), 'GET /var HTTP/1.1\r\nHost: localhost\r\nX-Server-If: yes\r\nConnection: close\r\n\r\n');
  assert.equal(r.body.toString(), 'server if\n');
});

test('an if block is a level of its own', async () => {
  const outer = await same(pair(), 'GET /hdr HTTP/1.1');
  assert.equal(outer.header('x-outer'), 'outer');
  const inner = await same(pair(), 'GET /hdr?inner=1 HTTP/1.1');
  assert.equal(inner.header('x-inner'), 'inner');
  assert.equal(inner.header('x-outer'), undefined);
  // an `if` without a content handler of its own keeps the one chosen so far (proxy_if.t)
  assert.equal((await same(pair(), 'GET /ifproxy HTTP/1.1')).body.toString(), 'backend /ifproxy\n');
  assert.equal((await same(pair(), 'GET /ifproxy?second=1 HTTP/1.1')).status, 500);
  // the level of the last true `if` is the one that stays
  assert.equal((await same(pair(), 'GET /seq?a=1&b=1 HTTP/1.1')).body.toString(), 'seq=ab\n');
});
