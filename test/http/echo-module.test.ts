// ngx_http_echo_module: the same configuration on Gatehouse and on Debian's nginx with
// libnginx-mod-http-echo; what a client sees (status, headers, body) must be the same.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { startPair } from '../kit/pair.ts';
import { ask, same } from '../lua/hooks-kit.ts';

const pair = await startPair({ after }, {
  conf: `load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;
events {}
http {
    access_log off;
    default_type text/plain;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /e {
            echo hello   world;
            echo -n "no newline";
            echo -- -n is text;
            echo_duplicate 3 "ab";
            echo;
            echo "x=$arg_x";
        }
        location /big {
            echo_duplicate 300000 "0123456789";
            echo_flush;
            echo_duplicate 300000 "abcdefghij";
            echo end;
        }
        location /flush {
            echo a;
            echo_flush;
            echo_sleep 0.01;
            echo b;
        }
        location /loc {
            echo before;
            echo_location /sub "x=1";
            echo_location_async /sub?y=2;
            echo_location /sub;
            echo after;
        }
        location /sub { echo "sub $args"; }
        location /method { echo_location /method-sub; }
        location /method-sub { echo "$request_method"; }
        location /subreq {
            echo_status 201;
            echo_subrequest_async HEAD /sub;
            echo_subrequest POST /sub -q "p=1";
            echo_blocking_sleep 0.001;
            echo end;
        }
        location /body {
            echo_read_request_body;
            echo "[";
            echo_request_body;
            echo "]";
        }
        location /exec { echo_exec /target "a=b"; }
        location /named { echo_exec @named; }
        location /target { echo "target $uri $args"; }
        location @named { echo "named $uri"; }
        location /wrap {
            echo_before_body "BEFORE $uri";
            echo_before_body -n second;
            echo middle;
            echo_after_body AFTER;
        }
        location /static {
            root %%PREFIX%%/html;
            echo_before_body head;
            echo_after_body tail;
        }
        location /each {
            echo start;
            echo_foreach_split '&' $query_string;
                echo "[$echo_it]";
                echo_location /sub $echo_it;
            echo_end;
            echo "done $echo_it";
        }
        location /if {
            if ($arg_a) {
                echo "in if $arg_a";
            }
            echo "outside";
        }
        location /timer {
            echo_reset_timer;
            echo_sleep 0.05;
            echo "$echo_timer_elapsed";
        }
    }
}
`,
  files: { 'html/static/f.txt': 'file body\n' },
});

test('echo: arguments joined by spaces, -n, --, echo_duplicate, variables', async () => {
  const r = await same(pair, '/e?x=7');
  assert.equal(r.body, 'hello world\nno newline-n is text\nababab\nx=7\n');
  assert.equal(r.status, 200);
});

test('HEAD gets the head only; HTTP/1.0 gets the body without chunks', async () => {
  const head = await same(pair, 'HEAD /e HTTP/1.1');
  assert.equal(head.body, '');
  assert.equal((await same(pair, 'GET /e?x=1 HTTP/1.0')).body, 'hello world\nno newline-n is text\nababab\nx=1\n');
});

test('a big flushed body waits for the client, then goes on', async () => {
  const r = await same(pair, '/big');
  assert.equal(r.body.length, 6_000_004);
  assert.ok(r.body.endsWith('ghijend\n'));
});

test('echo_flush and echo_sleep', async () => {
  assert.equal((await same(pair, '/flush')).body, 'a\nb\n');
});

test('echo_location and echo_location_async put the subrequest bodies in place', async () => {
  assert.equal((await same(pair, '/loc')).body, 'before\nsub x=1\nsub y=2\nsub \nafter\n');
});

test('echo_subrequest(_async) with a method and -q; echo_status; echo_blocking_sleep', async () => {
  const r = await same(pair, '/subreq');
  assert.equal(r.status, 201);
  assert.equal(r.body, 'sub p=1\nend\n');
});

test('echo_read_request_body and echo_request_body', async () => {
  const r = await same(pair, 'POST /body HTTP/1.1', 'Content-Length: 5\r\n', 'hello');
  assert.equal(r.body, '[\nhello]\n');
});

test('echo_exec: to a URI with arguments, and to a named location', async () => {
  assert.equal((await same(pair, '/exec')).body, 'target /target a=b\n');
  assert.equal((await same(pair, '/named')).body, 'named /named\n');
});

test('echo_before_body and echo_after_body around echo and around a static file', async () => {
  assert.equal((await same(pair, '/wrap')).body, 'BEFORE /wrap\nsecondmiddle\nAFTER\n');
  const r = await same(pair, '/static/f.txt');
  assert.equal(r.body, 'head\nfile body\ntail\n');
});

test('echo_foreach_split … echo_end with $echo_it', async () => {
  assert.equal((await same(pair, '/each?a=1&&b=2')).body, 'start\n[a=1]\nsub a=1\n[b=2]\nsub b=2\ndone \n');
});

test('echo inside if in a location makes that block\'s content', async () => {
  assert.equal((await same(pair, '/if?a=1')).body, 'in if 1\n');
  assert.equal((await same(pair, '/if')).body, 'outside\n');
});

test('$echo_timer_elapsed counts from echo_reset_timer', async () => {
  const r = await ask(pair.gh, '/timer');
  assert.match(r.body, /^0\.0[5-9]\d\n$|^0\.[1-9]\d\d\n$/);
});

test("$request_method in a subrequest is the main request's, as nginx reads r->main", async () => {
  assert.equal((await same(pair, 'POST /method HTTP/1.1', 'Content-Length: 0\r\n')).body, 'POST\n');
});
