// access_log: inheritance (a level with its own access_log uses only its own),
// off, several logs and one file named twice, if=, error pages, and the
// default logs/access.log. Where nginx can run the same configuration, the
// files are compared with Debian's nginx (reference: nginx 1.22).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { startGatehouse, startNginx, nginxSkip } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { httpGet } from '../kit/client.ts';
import { lines, waitLines } from './helpers.ts';

const conf = `
events {}
http {
    log_format f '$uri:$status';
    log_format g 'g $uri$is_args$args';
    access_log %%PREFIX%%/http.log f;

    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location /inherit { return 200; }
        location /own {
            access_log %%PREFIX%%/own.log f;
            return 200;
            location /own/nested { return 201; }
            location /own/off { access_log off; return 200; }
        }
        location /two {
            access_log %%PREFIX%%/a.log f;
            access_log %%PREFIX%%/b.log g;
            access_log %%PREFIX%%/a.log g;
            return 200;
        }
        location /if { access_log %%PREFIX%%/if.log g if=$arg_log; return 200; }
        location /if2 { access_log %%PREFIX%%/if.log g if=$arg_a$arg_b; return 200; }
        location /offmix { access_log %%PREFIX%%/never.log f; access_log off; return 200; }
        location /ep { error_page 404 = /fallback; return 404; }
        location /ep2 { error_page 403 /fallback; return 403; }
        location /fallback { access_log %%PREFIX%%/fallback.log f; return 200 "fallback"; }
        location /done { access_log %%PREFIX%%/done.log f; return 200; }
    }
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        access_log %%PREFIX%%/srv2.log f;
        location / { return 200; }
        location /off { access_log off; return 200; }
    }
    server {
        listen 127.0.0.1:%%PORT_8082%%;
        access_log off;
        location / { return 200; }
        location /on { access_log %%PREFIX%%/on.log f; return 200; }
    }
}
`;

const FILES = ['http.log', 'own.log', 'a.log', 'b.log', 'if.log', 'fallback.log', 'srv2.log', 'on.log', 'never.log'];

async function scenario(srv: RunningServer): Promise<Record<string, string[]>> {
  const [p0, p1, p2] = [srv.port(8080), srv.port(8081), srv.port(8082)];
  for (const path of ['/inherit', '/own', '/own/nested', '/own/off', '/two', '/if', '/if?log=', '/if?log=0',
    '/if?log=1', '/if?log=yes', '/if2?a=0&b=0', '/if2?a=0', '/if2?b=x', '/offmix', '/ep', '/ep2']) {
    await httpGet(p0, path);
  }
  for (const path of ['/', '/off']) await httpGet(p1, path);
  for (const path of ['/', '/on']) await httpGet(p2, path);
  // a last request whose line shows the others were written
  await httpGet(p0, '/done');
  await waitLines(srv, 'done.log', 1);
  const out: Record<string, string[]> = {};
  for (const f of FILES) out[f] = lines(srv, f);
  out.exists = FILES.filter((f) => fs.existsSync(srv.path(f)));
  return out;
}

async function run(start: typeof startGatehouse): Promise<Record<string, string[]>> {
  const srv = await start({ conf });
  try {
    return await scenario(srv);
  } finally {
    await srv.stop();
  }
}

test('inheritance, off, several logs, if=, error pages', async () => {
  const logs = await run(startGatehouse);
  assert.deepEqual(logs['http.log'], ['/inherit:200']);
  assert.deepEqual(logs['own.log'], ['/own:200', '/own/nested:201']);
  // one file named twice gets a line per directive, each in its own format
  // ($args without a query string is "not found": -)
  assert.deepEqual(logs['a.log'], ['/two:200', 'g /two-']);
  assert.deepEqual(logs['b.log'], ['g /two-']);
  // if=: empty or "0" skips the line; "00" does not
  assert.deepEqual(logs['if.log'], ['g /if?log=1', 'g /if?log=yes', 'g /if2?a=0&b=0', 'g /if2?b=x']);
  // the location the request ends in decides: here the error page's (with `=`, its status)
  assert.deepEqual(logs['fallback.log'], ['/fallback:200', '/fallback:403']);
  assert.deepEqual(logs['srv2.log'], ['/:200']);
  assert.deepEqual(logs['on.log'], ['/on:200']);
  assert.deepEqual(logs['never.log'], []);
});

test('the same files as nginx writes', { skip: nginxSkip }, async () => {
  const [ours, theirs] = [await run(startGatehouse), await run(startNginx)];
  assert.deepEqual(ours, theirs);
});

test('without access_log: logs/access.log in the combined format', async (t) => {
  const srv = await startGatehouse({
    conf: `
events {}
http {
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / { return 200 "hi"; }
    }
}
`,
  });
  t.after(() => srv.stop());
  await httpGet(srv.port(8080), '/x?y=1', { 'User-Agent': 'tester/1.0', Referer: 'http://r/' });
  const [line] = await waitLines(srv, 'logs/access.log', 1);
  assert.match(line!, /^127\.0\.0\.1 - - \[\d\d\/\w{3}\/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] "GET \/x\?y=1 HTTP\/1\.0" 200 2 "http:\/\/r\/" "tester\/1\.0"$/);
});

test('no default log when every server has its own', async (t) => {
  const srv = await startGatehouse({
    conf: `
events {}
http {
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        access_log %%PREFIX%%/own.log;
        location / { return 200; }
    }
}
`,
  });
  t.after(() => srv.stop());
  await httpGet(srv.port(8080), '/');
  await waitLines(srv, 'own.log', 1);
  assert.equal(fs.existsSync(srv.path('logs/access.log')), false);
});
