/**
 * ngx_http_rewrite_module: `rewrite` (flags, arguments, captures, redirects
 * and their unescaping), `return`, `set`, server-level statements, the
 * internal redirection limit. Reference: Debian's nginx 1.22 on the same
 * configuration (every request is also sent to nginx and compared), and
 * nginx-tests' rewrite.t / rewrite_unescape.t for the cases taken from them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rawRequest } from '../kit/client.ts';
import { ask, logMatches, same, sharedPair } from './locations-kit.ts';

const conf = `
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;

        rewrite ^/old/(.*)$ /new/$1 last;
        if ($arg_srv) { return 200 "server-level\\n"; }

        location /new/ { return 200 "new $uri $args\\n"; }
        location /redirect { rewrite ^ http://example.com/ redirect; }
        location /add { rewrite ^ http://example.com/?c=d redirect; }
        location /no { rewrite ^ http://example.com/?c=d? redirect; }
        location /perm { rewrite ^/perm(.*)$ /target$1 permanent; }
        location /scheme { rewrite ^ $scheme://example.com$uri; }

        location /capture { rewrite ^(.*) $1?c=d; return 200 "uri:$uri args:$args\\n"; }
        location /capturedup { rewrite ^(.*) $1?c=$1; return 200 "uri:$uri args:$args\\n"; }
        location /dropargs { rewrite ^ /new/dropped? last; }
        location /chain { rewrite ^/chain(.*)$ /step$1; rewrite ^/step(.*)$ /new/chained$1; }
        location /brk { rewrite ^ /new/target break; return 200 "after break\\n"; }
        location /nomatch { rewrite ^/other /new/x last; return 200 "no match $uri\\n"; }
        location /loop { rewrite ^ /loop last; }
        location /empty { rewrite ^.*$ $arg_none last; }

        location /t1 { rewrite ^ $arg_r? redirect; }
        location /t4 { rewrite ^(.*) http://example.com$1 redirect; }

        location /set {
            set $a "1$arg_b";
            set $b $a-2;
            set $args "replaced";
            return 200 "a=$a b=$b args=$args later=$later\\n";
        }
        location /later { set $later "set"; return 200 "$later\\n"; }
        location /prefixed { set $http_foo "set_foo"; return 200 "$http_foo $http_bar $arg_q\\n"; }
        location /prefixed-other { set $http_bar "set_bar"; set $arg_q "set_q"; }

        location /rwlog { error_log %%PREFIX%%/rewrite.log notice; rewrite_log on; rewrite ^/rwlog(.*)$ /new/logged$1 last; }
        location /rwquiet { error_log %%PREFIX%%/rewrite.log notice; rewrite ^/rwquiet(.*)$ /new/quiet$1 last; }

        location /r204 { return 204; }
        location /r200 { return 200; }
        location /r306 { return 306; }
        location /r405 { return 405; }
        location /r404text { return 404 "text\\n"; }
        location /r302text { return 302 "/relative"; }
        location /rurl { return https://example.com/x; }
        location /r444 { return 444; }
        location /rafter { return 200 "first\\n"; return 200 "second\\n"; }
    }
}
`;

const pair = sharedPair({ conf });

test('rewrite flags, arguments and captures match nginx', async () => {
  const location = async (req: string) => (await same(pair(), `GET ${req} HTTP/1.1`)).header('location');

  assert.equal(await location('/redirect'), 'http://example.com/');
  assert.equal(await location('/redirect?a=b'), 'http://example.com/?a=b');
  assert.equal(await location('/add?a=b'), 'http://example.com/?c=d&a=b');
  assert.equal(await location('/no?a=b'), 'http://example.com/?c=d');
  const perm = await same(pair(), 'GET /perm/x?q=1 HTTP/1.1');
  assert.equal(perm.status, 301);
  assert.match(perm.header('location') ?? '', /^http:\/\/localhost:\d+\/target\/x\?q=1$/);
  assert.equal(await location('/scheme/p'), 'http://example.com/scheme/p');
  // rewrite_unescape.t: the redirect is unescaped up to an escaped "?"
  assert.equal(await location('/t1?r=http%3A%2F%2Fexample.com%2F%3Ffrom'), 'http://example.com/?from');
  assert.equal(await location('/t1?r=http%3A%2F%2Fexample.com%0D%0Asplit'), 'http://example.com%0D%0Asplit');
  assert.equal(await location('/t4/a%20b'), 'http://example.com/t4/a%20b');

  const body = async (req: string) => (await same(pair(), `GET ${req} HTTP/1.1`)).body.toString();
  assert.equal(await body('/capture/%25?a=b'), 'uri:/capture/% args:c=d&a=b\n');
  assert.equal(await body('/capturedup/%25?a=b'), 'uri:/capturedup/% args:c=/capturedup/%25&a=b\n');
  assert.equal(await body('/dropargs?a=b'), 'new /new/dropped \n');
  assert.equal(await body('/chain/z?k=v'), 'new /new/chained/z k=v\n');
  assert.equal(await body('/nomatch'), 'no match /nomatch\n');
  assert.equal(await body('/old/thing?x=1'), 'new /new/thing x=1\n');
  assert.equal(await body('/anything?srv=1'), 'server-level\n');
});

test('break stops the program; the URI stays rewritten', async () => {
  // no content handler in /brk: the static module looks for the rewritten URI's file
  const r = await same(pair(), 'GET /brk HTTP/1.1');
  assert.equal(r.status, 404);
  assert.doesNotMatch(r.body.toString(), /after break/);
});

test('internal redirection cycle ends with 500 and nginx\'s log line', async () => {
  assert.equal((await same(pair(), 'GET /loop HTTP/1.1')).status, 500);
  assert.deepEqual(logMatches(pair().gh, /redirection cycle/).map((l) => l.replace(/, client.*/, '')),
    ['[error] rewrite or internal redirection cycle while processing "/loop"']);
  assert.equal((await same(pair(), 'GET /empty HTTP/1.1')).status, 500);
  assert.equal(logMatches(pair().gh, /the rewritten URI has a zero length/).length, 1);
});

test('rewrite_log writes the matches and results at notice level', async () => {
  assert.equal((await same(pair(), 'GET /rwlog/a?k=v HTTP/1.1')).body.toString(), 'new /new/logged/a k=v\n');
  assert.equal((await same(pair(), 'GET /rwquiet/a HTTP/1.1')).body.toString(), 'new /new/quiet/a \n');
  for (const srv of [pair().gh, pair().ng]) {
    if (!srv) continue;
    const lines = srv.logLines('rewrite.log').map((l) => l.replace(/^.*\[notice\] \S+ \*\d+ /, '').replace(/, client: .*/, ''));
    assert.deepEqual(lines, ['"^/rwlog(.*)$" matches "/rwlog/a"', 'rewritten data: "/new/logged/a", args: "k=v"'], srv.flavor);
  }
});

test('set, return and their statuses match nginx', async () => {
  const r = await same(pair(), 'GET /set?b=7 HTTP/1.1');
  assert.equal(r.body.toString(), 'a=17 b=17-2 args=replaced later=\n');
  assert.equal(logMatches(pair().gh, /using uninitialized "later" variable/).length, 1);
  assert.equal((await same(pair(), 'GET /later HTTP/1.1')).body.toString(), 'set\n');
  // $http_x set somewhere reads the header until set (nginx-tests' rewrite_set.t)
  const prefixed = await same(pair(), 'GET /prefixed?q=1 HTTP/1.1\r\nHost: localhost\r\nFoo: f\r\nBar: b\r\nConnection: close\r\n\r\n');
  assert.equal(prefixed.body.toString(), 'set_foo b 1\n');

  assert.equal((await same(pair(), 'GET /r204 HTTP/1.1')).status, 204);
  assert.equal((await same(pair(), 'GET /r200 HTTP/1.1')).status, 200);
  assert.equal((await same(pair(), 'GET /r306 HTTP/1.1')).statusLine, 'HTTP/1.1 306 ');
  assert.match((await same(pair(), 'GET /r405 HTTP/1.1')).body.toString(), /405 Not Allowed/);
  const text = await same(pair(), 'GET /r404text HTTP/1.1');
  assert.equal(text.status, 404);
  assert.equal(text.body.toString(), 'text\n');
  assert.match((await same(pair(), 'GET /r302text HTTP/1.1')).header('location') ?? '', /^http:\/\/localhost:\d+\/relative$/);
  const url = await same(pair(), 'GET /rurl HTTP/1.1');
  assert.equal(url.status, 302);
  assert.equal(url.header('location'), 'https://example.com/x');
  assert.equal((await same(pair(), 'GET /rafter HTTP/1.1')).body.toString(), 'first\n');
});

test('return 444 closes the connection without an answer', async () => {
  for (const srv of [pair().gh, pair().ng]) {
    if (!srv) continue;
    const raw = await rawRequest(srv.port(8080), 'GET /r444 HTTP/1.1\r\nHost: localhost\r\n\r\n');
    assert.equal(raw.length, 0, srv.flavor);
  }
  assert.equal((await ask(pair().gh, 'GET /r200 HTTP/1.1')).status, 200);
});
