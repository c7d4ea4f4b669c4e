/**
 * fastcgi_pass against a real php-fpm, compared with Debian's nginx on the
 * same configuration: the CGI params PHP sees (fastcgi.conf, split_path_info,
 * fastcgi_index, params and their inheritance, HTTP_* headers), request
 * bodies, Status and Location, large bodies with and without buffering,
 * stderr in the error log, catch_stderr, intercept_errors, timeouts,
 * next_upstream, keep_conn with upstream keepalive, and the unix socket.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { startPair } from '../kit/pair.ts';
import type { Pair } from '../kit/pair.ts';
import { freePort } from '../kit/server.ts';
import { both, phpFpmSkip, startPhpFpm } from './fastcgi-kit.ts';
import type { PhpFpm } from './fastcgi-kit.ts';

const CONF_DIR = fileURLToPath(new URL('../../conf/', import.meta.url));

/** Everything PHP was given but what differs by nature (times, ports, versions). */
const ENV = `<?php
$skip = ['REQUEST_TIME', 'REQUEST_TIME_FLOAT', 'REMOTE_PORT', 'SERVER_PORT', 'SERVER_SOFTWARE', 'argv', 'argc'];
ksort($_SERVER);
foreach ($_SERVER as $k => $v) if (!in_array($k, $skip)) echo "$k=$v\\n";
`;

const SCRIPTS: Record<string, string> = {
  'env.php': ENV,
  'dir/index.php': ENV,
  'post.php': `<?php $b = file_get_contents('php://input'); echo strlen($b), ' [', $_SERVER['CONTENT_LENGTH'], '] [', $_SERVER['CONTENT_TYPE'], "]\\n", $b;`,
  'status.php': `<?php header('Status: 404 Not Found'); header('X-Up: yes'); echo "missing\\n";`,
  'status-code.php': `<?php http_response_code(403); echo "denied\\n";`,
  'redirect.php': `<?php header('Location: /elsewhere?x=1'); echo "moved\\n";`,
  'redirect-abs.php': `<?php header('Location: http://example.com/there'); header('Set-Cookie: a=b; path=/');`,
  'big.php': `<?php for ($i = 0; $i < 300; $i++) { echo str_repeat(chr(97 + $i % 26), 1000), "\\n"; if ($i % 50 == 0) flush(); }`,
  'slow.php': `<?php sleep(3); echo "late\\n";`,
  'stderr.php': `<?php error_log('first message'); echo "body\\n"; flush(); error_log('second message.'); echo "more\\n";`,
  'fatal.php': `<?php error_log('FATAL: broken'); echo "never\\n";`,
  'empty.php': `<?php header('Content-Type: text/plain');`,
  'length.php': `<?php header('Content-Length: 5'); echo "12345";`,
  'extra.php': `<?php header('Content-Length: 3'); echo "123-not-this";`,
  'short.php': `<?php header('Content-Length: 10'); echo "123";`,
};

let fpm: PhpFpm;
let pair: Pair;

const conf = (f: PhpFpm, deadPort: number) => `
events {}
http {
    access_log %%PREFIX%%/access.log;
    client_body_temp_path %%PREFIX%%/client_body_temp;
    fastcgi_temp_path %%PREFIX%%/fastcgi_temp;
    upstream fpm_retry { server 127.0.0.1:${deadPort}; server 127.0.0.1:${f.port}; }
    upstream fpm_keep { server 127.0.0.1:${f.port}; keepalive 4; }
    fastcgi_param FROM_HTTP http-level;
    error_page 404 /404.html;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root ${f.dir};
        location = /404.html { return 200 "our own 404\\n"; }
        location ~ ^/params/ {
            fastcgi_param SCRIPT_FILENAME ${f.dir}/env.php;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_param OWN_ONLY here;
            fastcgi_param EMPTY_SKIPPED $arg_none if_not_empty;
            fastcgi_param EMPTY_SENT $arg_none;
            fastcgi_param HTTP_X_FIXED fixed;
            fastcgi_pass 127.0.0.1:${f.port};
        }
        location /inherit/ {
            fastcgi_param SCRIPT_FILENAME ${f.dir}/env.php;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_param FROM_HTTP ignored;
            location /inherit/deeper/ { fastcgi_pass 127.0.0.1:${f.port}; }
        }
        location ~ ^(.+\\.php)(/.*)?$ {
            fastcgi_split_path_info ^(.+\\.php)(/.*)$;
            include ${CONF_DIR}fastcgi.conf;
            fastcgi_param PATH_INFO $fastcgi_path_info;
            fastcgi_pass 127.0.0.1:${f.port};
        }
        location /dir/ {
            fastcgi_index index.php;
            include ${CONF_DIR}fastcgi.conf;
            fastcgi_pass unix:${f.socket};
        }
        location /nobuf/ {
            fastcgi_buffering off;
            fastcgi_param SCRIPT_FILENAME ${f.dir}/big.php;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_pass 127.0.0.1:${f.port};
        }
        location /small-buffers/ {
            fastcgi_buffer_size 1k;
            fastcgi_buffers 2 1k;
            fastcgi_busy_buffers_size 1k;
            fastcgi_param SCRIPT_FILENAME ${f.dir}/big.php;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_pass 127.0.0.1:${f.port};
        }
        location /timeout/ {
            fastcgi_read_timeout 300ms;
            fastcgi_param SCRIPT_FILENAME ${f.dir}/slow.php;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_pass 127.0.0.1:${f.port};
        }
        location /catch/ {
            fastcgi_catch_stderr "FATAL";
            fastcgi_param SCRIPT_FILENAME ${f.dir}/fatal.php;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_pass 127.0.0.1:${f.port};
        }
        location /intercept/ {
            fastcgi_intercept_errors on;
            fastcgi_param SCRIPT_FILENAME ${f.dir}/status.php;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_pass 127.0.0.1:${f.port};
        }
        location /hide/ {
            fastcgi_hide_header X-Powered-By;
            fastcgi_pass_header Status;
            fastcgi_pass_request_headers off;
            fastcgi_pass_request_body off;
            fastcgi_param SCRIPT_FILENAME ${f.dir}/post.php;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_param CONTENT_LENGTH $content_length;
            fastcgi_param CONTENT_TYPE $content_type;
            fastcgi_pass 127.0.0.1:${f.port};
        }
        location /retry/ {
            fastcgi_param SCRIPT_FILENAME ${f.dir}/status-code.php;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_pass fpm_retry;
        }
        location /keep/ {
            fastcgi_keep_conn on;
            fastcgi_param SCRIPT_FILENAME ${f.dir}/env.php;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_param QUERY_STRING $query_string;
            fastcgi_pass fpm_keep;
        }
        location /var/ {
            set $fpm 127.0.0.1:${f.port};
            fastcgi_param SCRIPT_FILENAME ${f.dir}/status-code.php;
            fastcgi_param REQUEST_METHOD $request_method;
            fastcgi_pass $fpm;
        }
    }
}
`;

before(async () => {
  if (phpFpmSkip) return;
  fpm = await startPhpFpm(SCRIPTS);
});

after(async () => {
  await fpm?.stop();
});

const get = (uri: string, extra = '') => `GET ${uri} HTTP/1.0\r\nHost: localhost\r\n${extra}\r\n`;

test('fastcgi against php-fpm, as nginx', { skip: phpFpmSkip }, async (t) => {
  pair = await startPair(t, { conf: conf(fpm, await freePort()) });

  await t.test('the params of fastcgi.conf, split_path_info and the request headers', async () => {
    const r = await both(pair, get('/env.php/extra/path?a=1&b=2', 'User-Agent: test\r\nX-Custom-Header: v1\r\nCookie: a=1\r\n'));
    assert.match(r.response, /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(r.response, /\nSCRIPT_NAME=\/env\.php\n/);
    assert.match(r.response, /\nPATH_INFO=\/extra\/path\n/);
    assert.match(r.response, /\nSCRIPT_FILENAME=\/.*\/env\.php\n/);
    assert.match(r.response, /\nQUERY_STRING=a=1&b=2\n/);
    assert.match(r.response, /\nHTTP_X_CUSTOM_HEADER=v1\n/);
  });

  await t.test('a level with its own params inherits none; if_not_empty; a param names a header', async () => {
    const r = await both(pair, get('/params/x', 'X-Fixed: from-client\r\n'));
    assert.match(r.response, /\nOWN_ONLY=here\n/);
    assert.doesNotMatch(r.response, /FROM_HTTP|EMPTY_SKIPPED/);
    assert.match(r.response, /\nEMPTY_SENT=\n/);
    assert.match(r.response, /\nHTTP_X_FIXED=fixed\n/);
    const inherited = await both(pair, get('/inherit/deeper/y'));
    assert.match(inherited.response, /\nFROM_HTTP=ignored\n/);
  });

  await t.test('fastcgi_index over a unix socket', async () => {
    const r = await both(pair, get('/dir/?q'));
    assert.match(r.response, /\nSCRIPT_FILENAME=\/.*\/dir\/index\.php\n/);
    assert.match(r.response, /\nSCRIPT_NAME=\/dir\/index\.php\n/);
  });

  await t.test('request bodies: with a length, chunked, empty', async () => {
    const body = 'name=value&other=' + 'x'.repeat(5000);
    const r = await both(pair, `POST /post.php HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    assert.match(r.response, new RegExp(`\r\n\r\n${body.length} \\[${body.length}\\]`));
    assert.ok(r.response.endsWith(body));
    const chunked = await both(pair, 'POST /post.php HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n');
    assert.match(chunked.response, /\r\n11 \[11\] \[\]\nhello world/);
    const empty = await both(pair, 'POST /post.php HTTP/1.0\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n');
    assert.match(empty.response, /\r\n\r\n0 \[0\] \[\]\n$/);
  });

  await t.test('Status, Location, Set-Cookie, Content-Length and an empty body', async () => {
    assert.match((await both(pair, get('/status.php'))).response, /^HTTP\/1\.1 404 Not Found\r\n[^]*X-Up: yes\r\n[^]*missing\n$/);
    assert.match((await both(pair, get('/status-code.php'))).response, /^HTTP\/1\.1 403 Forbidden\r\n/);
    assert.match((await both(pair, get('/redirect.php'))).response, /^HTTP\/1\.1 302 Found\r\n[^]*Location: \/elsewhere\?x=1\r\n/);
    assert.match((await both(pair, get('/redirect-abs.php'))).response, /Location: http:\/\/example\.com\/there\r\n/);
    assert.match((await both(pair, get('/empty.php'))).response, /Content-Type: text\/plain;charset=UTF-8\r\n[^]*\r\n\r\n$/);
    assert.match((await both(pair, get('/length.php'))).response, /Content-Length: 5\r\n[^]*\r\n\r\n12345$/);
    await both(pair, `HEAD /status.php HTTP/1.0\r\nHost: localhost\r\n\r\n`);
  });

  await t.test('a body longer or shorter than its Content-Length: cut at the length, or cut short', async () => {
    const extra = await both(pair, get('/extra.php'));
    assert.match(extra.response, /\r\n\r\n123$/);
    assert.match(extra.errors.join('\n'), /upstream sent more data than specified in "Content-Length" header/);
    const short = await both(pair, get('/short.php'));
    assert.match(short.response, /Content-Length: 10\r\n[^]*\r\n\r\n123$/);
    assert.match(short.errors.join('\n'), /upstream prematurely closed FastCGI request/);
  });

  await t.test('large bodies: buffered, unbuffered, through small buffers', async () => {
    for (const uri of ['/big.php', '/nobuf/', '/small-buffers/']) {
      const r = await both(pair, get(uri));
      const body = r.response.slice(r.response.indexOf('\r\n\r\n') + 4);
      assert.equal(body.length, 300 * 1001, uri);
      assert.equal(body.slice(0, 3), 'aaa');
    }
  });

  await t.test('stderr is logged as nginx does; catch_stderr makes it a 502', async () => {
    const r = await both(pair, get('/stderr.php'));
    assert.match(r.response, /\r\n\r\nbody\nmore\n$/);
    assert.match(r.errors[0], /FastCGI sent in stderr: "PHP message: first message" while reading response header from upstream/);
    assert.match(r.errors[1], /FastCGI sent in stderr: "; PHP message: second message" while reading upstream/);
    const caught = await both(pair, get('/catch/'));
    assert.match(caught.response, /^HTTP\/1\.1 502 Bad Gateway\r\n/);
  });

  await t.test('intercept_errors, hidden and passed headers, request headers and body not passed', async () => {
    assert.match((await both(pair, get('/intercept/'))).response, /^HTTP\/1\.1 404 Not Found\r\n[^]*our own 404\n$/);
    const r = await both(pair, 'POST /hide/ HTTP/1.0\r\nHost: localhost\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nabc');
    assert.doesNotMatch(r.response, /X-Powered-By/);
    assert.match(r.response, /\r\n\r\n0 \[3\] \[text\/plain\]\n$/);
  });

  await t.test('read timeout, next upstream, variables, keep_conn with keepalive', async () => {
    const slow = await both(pair, get('/timeout/'));
    assert.match(slow.response, /^HTTP\/1\.1 504 Gateway Time-out\r\n/);
    assert.match(slow.errors[0], /upstream timed out \(110: Connection timed out\) while reading response header from upstream/);
    const retry = await both(pair, get('/retry/'));
    assert.match(retry.response, /^HTTP\/1\.1 403 /);
    assert.match(retry.errors[0], /connect\(\) failed \(111: Connection refused\) while connecting to upstream/);
    assert.match((await both(pair, get('/var/'))).response, /^HTTP\/1\.1 403 /);
    for (let i = 0; i < 4; i++) assert.match((await both(pair, get(`/keep/?n=${i}`))).response, new RegExp(`\nQUERY_STRING=n=${i}\n`));
  });
});
