// error_log: several destinations per level each with its own level (files
// and stderr, a file named twice), error_log in http/server/location for the
// requests there, nginx's line format with the request context suffix, and
// lines from two workers under load that never tear. The per-level counts
// follow nginx-tests' error_log.t, with messages from modules we have
// (info: auth_basic, warn: uninitialized variable, error: file not found);
// reference: Debian's nginx 1.22 on the same configuration.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startGatehouse, startNginx, nginxSkip } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { httpGet, rawRequest } from '../kit/client.ts';
import { runLoad } from '../kit/load.ts';
import { lines, waitLines } from './helpers.ts';

const conf = `
error_log %%PREFIX%%/main-warn.log warn;
error_log %%PREFIX%%/main-notice.log notice;
events {}
http {
    access_log %%PREFIX%%/access.log;
    error_log %%PREFIX%%/http.log error;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        location /info {
            auth_basic "x";
            auth_basic_user_file %%PREFIX%%/htpasswd;
            error_log %%PREFIX%%/e_info_debug.log debug;
            error_log %%PREFIX%%/e_info_info.log info;
            error_log %%PREFIX%%/e_info_notice.log notice;
        }
        location /warn {
            error_log %%PREFIX%%/e_warn_notice.log notice;
            error_log %%PREFIX%%/e_warn_warn.log warn;
            error_log %%PREFIX%%/e_warn_error.log error;
            return 200 "$nosuch";
        }
        location /error {
            error_log %%PREFIX%%/e_error_warn.log warn;
            error_log %%PREFIX%%/e_error_error.log;
            error_log %%PREFIX%%/e_error_alert.log alert;
        }
        location /file_low {
            error_log %%PREFIX%%/e_multi_low.log warn;
            error_log %%PREFIX%%/e_multi_low.log;
        }
        location /file_dup {
            error_log %%PREFIX%%/e_multi.log;
            error_log %%PREFIX%%/e_multi.log;
        }
        location /file_high {
            error_log %%PREFIX%%/e_multi_high.log emerg;
            error_log %%PREFIX%%/e_multi_high.log;
        }
        location /stderr { error_log stderr; }
        location /inherit { }
        location /done { return 200; }
        location /define { set $nosuch 1; }
    }
}
`;

const FILES = ['e_info_debug.log', 'e_info_info.log', 'e_info_notice.log', 'e_warn_notice.log', 'e_warn_warn.log',
  'e_warn_error.log', 'e_error_warn.log', 'e_error_error.log', 'e_error_alert.log', 'e_multi_low.log', 'e_multi.log',
  'e_multi_high.log', 'http.log'];

/** Error log lines without time and pid#tid, the prefix as PREFIX; debug output left out. */
function normalized(srv: RunningServer, text: string[]): string[] {
  // Debian's nginx is built --with-debug: its [debug] lines (and what they print over several lines) are left out
  return text.filter((l) => /^\S+ \S+ \[(info|notice|warn|error|crit|alert|emerg)\]/.test(l)).map((l) => l.replace(/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[(\w+)\] \d+#\d+: \*\d+ /, '[$1] ').replaceAll(srv.prefix, 'PREFIX'));
}

async function scenario(srv: RunningServer): Promise<Record<string, string[]>> {
  const port = srv.port(8080);
  for (const p of ['/info', '/warn', '/error', '/file_low', '/file_dup', '/file_high', '/inherit']) await httpGet(port, p);
  await rawRequest(port, 'GET /inherit/x HTTP/1.1\r\nHost: localhost\r\nReferer: http://from.example/\r\nConnection: close\r\n\r\n');
  await httpGet(port, '/done');
  await waitLines(srv, 'access.log', 9);
  const out: Record<string, string[]> = {};
  for (const f of FILES) out[f] = normalized(srv, lines(srv, f));
  // startup lines differ between the two servers; what matters is which levels reached which file
  for (const f of ['main-warn.log', 'main-notice.log']) out[f] = [...new Set(lines(srv, f).map((l) => /\[(\w+)\]/.exec(l)?.[1]))] as string[];
  return out;
}

async function run(start: typeof startGatehouse): Promise<Record<string, string[]>> {
  const srv = await start({ conf, files: { htpasswd: 'user:$apr1$x$y\n', 'html/index.html': 'x' } });
  try {
    return await scenario(srv);
  } finally {
    await srv.stop();
  }
}

const count = (l: string[] | undefined, level: string) => (l ?? []).filter((x) => x.startsWith(`[${level}]`)).length;

test('levels, several destinations, http and location error_log, the context suffix', async () => {
  const got = await run(startGatehouse);
  assert.equal(count(got['e_info_debug.log'], 'info'), 1);
  assert.equal(count(got['e_info_info.log'], 'info'), 1);
  assert.deepEqual(got['e_info_notice.log'], []);
  assert.equal(count(got['e_warn_notice.log'], 'warn'), 1);
  assert.equal(count(got['e_warn_warn.log'], 'warn'), 1);
  assert.deepEqual(got['e_warn_error.log'], []);
  assert.equal(count(got['e_error_warn.log'], 'error'), 1);
  assert.equal(count(got['e_error_error.log'], 'error'), 1);
  assert.deepEqual(got['e_error_alert.log'], []);
  // a file named twice gets a line per destination that accepts the level
  assert.equal(count(got['e_multi_low.log'], 'error'), 2);
  assert.equal(count(got['e_multi.log'], 'error'), 2);
  assert.equal(count(got['e_multi_high.log'], 'error'), 1);
  assert.deepEqual(got['e_error_error.log'], [
    '[error] open() "PREFIX/html/error" failed (2: No such file or directory), client: 127.0.0.1, server: localhost, request: "GET /error HTTP/1.0", host: "localhost"',
  ]);
  // locations without error_log use the http level's
  assert.deepEqual(got['http.log'], [
    '[error] open() "PREFIX/html/inherit" failed (2: No such file or directory), client: 127.0.0.1, server: localhost, request: "GET /inherit HTTP/1.0", host: "localhost"',
    '[error] open() "PREFIX/html/inherit/x" failed (2: No such file or directory), client: 127.0.0.1, server: localhost, request: "GET /inherit/x HTTP/1.1", host: "localhost", referrer: "http://from.example/"',
  ]);
  assert.deepEqual(got['main-warn.log'], []);
  assert.deepEqual(got['main-notice.log'], ['notice']);
});

test('the same as nginx', { skip: nginxSkip }, async () => {
  const [ours, theirs] = [await run(startGatehouse), await run(startNginx)];
  assert.deepEqual(ours, theirs);
});

test('error_log stderr', async (t) => {
  const srv = await startGatehouse({ conf, files: { htpasswd: 'user:$apr1$x$y\n' } });
  t.after(() => srv.stop());
  await httpGet(srv.port(8080), '/stderr');
  const deadline = Date.now() + 5000;
  while (!srv.output().stderr.includes('/stderr') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
  assert.match(srv.output().stderr, /^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[error\] \d+#\d+: \*\d+ open\(\) ".*\/html\/stderr" failed \(2: No such file or directory\), client: 127\.0\.0\.1, server: localhost, request: "GET \/stderr HTTP\/1\.0", host: "localhost"$/m);
});

test('two workers under load: one whole line per error', async (t) => {
  const srv = await startGatehouse({
    conf: `
worker_processes 2;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location / { root %%PREFIX%%/html; error_log %%PREFIX%%/errors.log; }
    }
}
`,
  });
  t.after(() => srv.stop());
  // a new connection per request: connections, not requests, are what the workers share out, and
  // eight kept-alive ones could all land on one worker on a busy machine
  const result = await runLoad({ port: srv.port(8080), path: '/missing/file', concurrency: 8, durationMs: 1500, keepAlive: false });
  // every request is a 404 (runLoad counts those as failures): nothing else went wrong
  assert.equal(result.statuses[404], result.sent, result.errors.slice(0, 3).join(', '));
  const got = await waitLines(srv, 'errors.log', result.statuses[404] ?? 0);
  assert.equal(got.length, result.statuses[404]);
  const bad = got.filter((l) => !/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[error\] \d+#\d+: \*\d+ open\(\) "[^"]+\/html\/missing\/file" failed \(2: No such file or directory\), client: 127\.0\.0\.1, server: localhost, request: "GET \/missing\/file HTTP\/1\.1", host: "localhost"$/.test(l));
  assert.deepEqual(bad.slice(0, 3), []);
  // both workers wrote
  assert.equal(new Set(got.map((l) => /\] (\d+#\d+):/.exec(l)?.[1])).size, 2);
});
