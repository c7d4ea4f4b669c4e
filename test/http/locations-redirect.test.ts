/**
 * Location headers: relative redirects made absolute with absolute_redirect,
 * server_name_in_redirect and port_in_redirect; the static module's `/dir`
 * → `/dir/` redirect, escaped, with arguments and with alias. Reference:
 * Debian's nginx 1.22 on the same configuration, and nginx-tests'
 * http_absolute_redirect.t for the cases taken from it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { same, sharedPair } from './locations-kit.ts';

const conf = `
events {}
http {
    access_log off;
    absolute_redirect off;

    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name on;
        root %%PREFIX%%;

        absolute_redirect on;
        error_page 400 /return301;

        location / { }
        location /return301 { return 301 /redirect; }
        location /return301/name { return 301 /redirect; server_name_in_redirect on; }
        location /return301/port { return 301 /redirect; port_in_redirect off; }
        location /i/ { alias %%PREFIX%%/; }
        location /rewrite { rewrite ^ /redirect?a=b redirect; }
        location /absolute { return 302 http://elsewhere/x; }
        location /auto/ { proxy_pass http://127.0.0.1:%%PORT_8081%%; }
        location "/auto sp/" { proxy_pass http://127.0.0.1:%%PORT_8081%%; }
        location /auto-a { return 200 "auto-a\\n"; }
        location /same { return 200 "same\\n"; }
        location /same/ { proxy_pass http://127.0.0.1:%%PORT_8081%%; }
    }

    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name off;
        root %%PREFIX%%;

        location / { }
        location /return301 { return 301 /redirect; }
        location /i/ { alias %%PREFIX%%/; }
        location /auto/ { proxy_pass http://127.0.0.1:%%PORT_8081%%; }
        location '/auto "#%<>?\\^\`{|}/' { proxy_pass http://127.0.0.1:%%PORT_8081%%; }
    }

    server {
        listen 127.0.0.1:%%PORT_8081%%;
        return 200 "backend $uri\\n";
    }
}
`;

const pair = sharedPair({ conf, files: { 'dir/index.html': 'dir\n', 'dir sp/index.html': 'sp\n' } });

async function location(host: string, uri: string): Promise<string | undefined> {
  const r = await same(pair(), `GET ${uri} HTTP/1.0\r\nHost: ${host}\r\n\r\n`);
  return r.header('location');
}

test('absolute redirects (http_absolute_redirect.t)', async () => {
  const p = pair().gh.port(8080);
  assert.equal(await location('on', '/dir'), `http://on:${p}/dir/`);
  assert.equal(await location('on', '/i/dir'), `http://on:${p}/i/dir/`);
  assert.equal(await location('on', '/dir%20sp'), `http://on:${p}/dir%20sp/`);
  assert.equal(await location('on', '/dir%20sp?a=b'), `http://on:${p}/dir%20sp/?a=b`);
  assert.equal(await location('on', '/return301'), `http://on:${p}/redirect`);
  assert.equal(await location('host', '/return301/name'), `http://on:${p}/redirect`);
  assert.equal(await location('host', '/return301'), `http://host:${p}/redirect`);
  assert.equal(await location('host', '/return301/port'), 'http://host/redirect');
  assert.equal(await location('on', '/rewrite?c=d'), `http://on:${p}/redirect?a=b&c=d`);
  assert.equal(await location('on', '/absolute'), 'http://elsewhere/x');
});

test('a proxied location named with a slash redirects its name without it (http_location_auto.t)', async () => {
  const p = pair().gh.port(8080);
  assert.equal(await location('on', '/auto'), `http://on:${p}/auto/`);
  assert.equal(await location('on', '/auto?a=b'), `http://on:${p}/auto/?a=b`);
  assert.equal(await location('on', '/auto%20sp'), `http://on:${p}/auto%20sp/`);
  assert.equal(await location('off', '/auto'), '/auto/');
  assert.equal(await location('off', '/auto%20%22%23%25%3C%3E%3F%5C%5E%60%7B%7C%7D'), '/auto%20%22%23%25%3C%3E%3F%5C%5E%60%7B%7C%7D/');
  // a prefix as long as the URI wins over the redirect; other locations are untouched
  assert.equal((await same(pair(), 'GET /same HTTP/1.0\r\nHost: on\r\n\r\n')).body.toString(), 'same\n');
  assert.equal((await same(pair(), 'GET /auto-a HTTP/1.0\r\nHost: on\r\n\r\n')).body.toString(), 'auto-a\n');
  assert.equal((await same(pair(), 'GET /auto/x HTTP/1.0\r\nHost: on\r\n\r\n')).body.toString(), 'backend /auto/x\n');
});

test('an invalid Host gives the local address in the redirect', async () => {
  const p = pair().gh.port(8080);
  assert.equal(await location('.', '/return301'), `http://127.0.0.1:${p}/redirect`);
});

test('absolute_redirect off keeps redirects relative', async () => {
  assert.equal(await location('off', '/dir'), '/dir/');
  assert.equal(await location('off', '/i/dir'), '/i/dir/');
  assert.equal(await location('off', '/dir%20sp'), '/dir%20sp/');
  assert.equal(await location('off', '/dir%20sp?a=b'), '/dir%20sp/?a=b');
  assert.equal(await location('off', '/return301'), '/redirect');
});
