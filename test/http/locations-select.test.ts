/**
 * Location selection: `=`, `^~`, longest prefix, regexes in order (with
 * captures and named groups), nested locations, `internal`, named locations,
 * `limit_except`. Reference: Debian's nginx 1.22 on the same configuration
 * (each request is also sent to nginx and the answers compared).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { logMatches, same, sharedPair } from './locations-kit.ts';

const conf = `
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;

        location = / { return 200 "exact root\\n"; }
        location / { return 200 "root\\n"; }
        location ^~ /images/ { return 200 "images\\n"; }
        location ~* \\.(gif|jpg)$ { return 200 "regex $1\\n"; }
        location ~ casefull { return 200 "casefull\\n"; }
        location = /foo { return 200 "foo exact\\n"; }
        location /foo { return 200 "foo prefix\\n"; }
        location /foo/ { return 200 "foo/ prefix\\n"; }

        location /outer/ {
            location /outer/inner/ { return 200 "inner\\n"; }
            location ~ \\.php$ { return 200 "nested regex\\n"; }
            return 200 "outer\\n";
        }
        location ~ ^/cap/(?<first>[a-z]+)/(\\d+) { return 200 "first=$first 2=$2 1=$1\\n"; }

        location /hidden { internal; return 200 "hidden\\n"; }
        location /to-hidden { error_page 404 /hidden; return 404; }
        location /to-named { error_page 404 = @fallback; return 404; }
        location @fallback { return 200 "named $uri $request_method\\n"; }

        location /lmt {
            limit_except GET { deny all; }
            return 200 "lmt $request_method\\n";
        }
        location /lmt-proxy {
            limit_except GET { proxy_pass http://127.0.0.1:%%PORT_8081%%; }
            return 200 "local\\n";
        }
    }
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        return 200 "backend $request_method $uri\\n";
    }
}
`;

const pair = sharedPair({ conf });

test('location selection matches nginx', async () => {
  const cases: Array<[string, string]> = [
    ['GET / HTTP/1.1', 'exact root'],
    ['GET /x HTTP/1.1', 'root'],
    ['GET /images/t.gif HTTP/1.1', 'images'],
    ['GET /t.gif HTTP/1.1', 'regex gif'],
    ['GET /t.GIF HTTP/1.1', 'regex GIF'],
    ['GET /casefull/t.gif HTTP/1.1', 'regex gif'],
    ['GET /casefull/ HTTP/1.1', 'casefull'],
    ['GET /CASEFULL/ HTTP/1.1', 'root'],
    ['GET /foo HTTP/1.1', 'foo exact'],
    ['GET /foobar HTTP/1.1', 'foo prefix'],
    ['GET /foo/bar HTTP/1.1', 'foo/ prefix'],
    ['GET /outer/x HTTP/1.1', 'outer'],
    ['GET /outer/inner/x HTTP/1.1', 'inner'],
    ['GET /outer/a.php HTTP/1.1', 'nested regex'],
    ['GET /cap/abc/42 HTTP/1.1', 'first=abc 2=42 1=abc'],
    ['GET /to-named?x=1 HTTP/1.1', 'named /to-named GET'],
    ['POST /to-named HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n', 'named /to-named POST'],
    ['GET /lmt HTTP/1.1', 'lmt GET'],
  ];
  for (const [request, body] of cases) {
    const r = await same(pair(), request);
    assert.equal(r.status, 200, request);
    assert.equal(r.body.toString(), `${body}\n`, request);
  }
});

test('internal locations, limit_except and HEAD match nginx', async () => {
  assert.equal((await same(pair(), 'GET /hidden HTTP/1.1')).status, 404);
  // reachable by an internal redirect; error_page without "=" keeps the status
  const hidden = await same(pair(), 'GET /to-hidden HTTP/1.1');
  assert.equal(hidden.status, 404);
  assert.equal(hidden.body.toString(), 'hidden\n');
  // limit_except GET allows HEAD too; other methods meet `deny all`
  assert.equal((await same(pair(), 'HEAD /lmt HTTP/1.1')).status, 200);
  const post = 'POST /lmt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n';
  assert.equal((await same(pair(), post)).status, 403);
  assert.equal((await same(pair(), 'DELETE /lmt HTTP/1.1')).status, 403);
  assert.ok(logMatches(pair().gh, /access forbidden by rule/).length >= 2);
  // limited methods get the block's content handler; the location's rewrite statements do not run for them
  assert.equal((await same(pair(), 'GET /lmt-proxy HTTP/1.1')).body.toString(), 'local\n');
  const proxied = await same(pair(), 'PUT /lmt-proxy HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
  assert.equal(proxied.body.toString(), 'backend PUT /lmt-proxy\n');
});
