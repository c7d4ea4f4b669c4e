// ngx_http_headers_more_filter_module: the same configuration on Gatehouse and on Debian's nginx
// with libnginx-mod-http-headers-more-filter; the response heads (Date aside) must be the same.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { startPair } from '../kit/pair.ts';
import { same } from '../lua/hooks-kit.ts';

const pair = await startPair({ after }, {
  conf: `load_module /usr/lib/nginx/modules/ngx_http_headers_more_filter_module.so;
load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;
events {}
http {
    access_log off;
    default_type text/plain;
    more_set_headers "X-Everywhere: yes";
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /set {
            more_set_headers "X-A: 1" "X-B: $arg_b" "Server: mine";
            more_set_headers -s "404 500" "X-Only-Errors: e";
            more_set_headers -t "text/html" "X-Html: h";
            add_header X-Added later;
            return 200 "ok\\n";
        }
        location /missing {
            more_set_headers -s 404 "X-Only-Errors: e";
            more_set_headers -s 200 "X-Ok: o";
        }
        location /clear {
            more_set_headers "X-Foo-1: a" "X-Foo-2: b" "X-Bar: c";
            more_clear_headers "X-Foo-*" Server "Content-Type";
            return 200 "cleared\\n";
        }
        location /type {
            default_type text/html;
            more_set_headers -t "text/plain text/html" "X-Typed: t";
            more_set_headers "Content-Type: application/json; charset=utf-8";
            return 200 "{}";
        }
        location /input {
            more_set_input_headers "X-In: set $arg_v" "User-Agent: replaced";
            more_set_input_headers -r "X-Absent: no" "Accept: replaced-only";
            more_clear_input_headers "X-Drop-*" "X-Gone";
            set $before $http_user_agent;
            echo "in=$http_x_in ua=$http_user_agent absent=$http_x_absent accept=$http_accept";
            echo "drop=$http_x_drop_me gone=$http_x_gone keep=$http_x_keep before=$before";
        }
    }
}
`,
});

const sorted = (h: Array<[string, string]>) => h.map(([n, v]) => `${n}: ${v}`);

test('more_set_headers: values with variables, Server replaced, -s and -t, add_header after', async () => {
  const r = await same(pair, '/set?b=two');
  assert.deepEqual(sorted(r.headers), ['Content-Type: text/plain', 'Content-Length: 3', 'Connection: close', 'X-Everywhere: yes', 'X-A: 1', 'X-B: two', 'X-Added: later']);
});

test('-s picks statuses: a 404 gets only the error headers', async () => {
  const r = await same(pair, '/missing');
  assert.equal(r.status, 404);
  assert.ok(sorted(r.headers).includes('X-Only-Errors: e'));
  assert.ok(!sorted(r.headers).includes('X-Ok: o'));
});

test('more_clear_headers: a wildcard, Server and Content-Type', async () => {
  const r = await same(pair, '/clear');
  assert.deepEqual(sorted(r.headers), ['Content-Length: 8', 'Connection: close', 'X-Everywhere: yes', 'X-Bar: c']);
});

test('-t matches the type without parameters; Content-Type can be set', async () => {
  const r = await same(pair, '/type');
  assert.ok(sorted(r.headers).includes('X-Typed: t'));
  assert.ok(sorted(r.headers).includes('Content-Type: application/json; charset=utf-8'));
});

test('input headers: set, -r replaces only, clear with a wildcard', async () => {
  const r = await same(pair, '/input?v=7', 'User-Agent: test\r\nAccept: */*\r\nX-Drop-Me: 1\r\nX-Gone: 2\r\nX-Keep: 3\r\n');
  // `set` ran first (headers-more runs at the end of the rewrite phase) and $http_user_agent kept its value
  assert.equal(r.body, 'in=set 7 ua=test absent= accept=replaced-only\ndrop= gone= keep=3 before=test\n');
});
