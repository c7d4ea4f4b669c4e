/**
 * post_action: the client gets the location's own response, nothing of the
 * post action's; the post action runs (a proxied one reaches its backend,
 * which records what it was asked) and the access log line is the post
 * action's, as with Debian's nginx 1.22.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ask, comparable, startPair } from './static-kit.ts';
import { waitLines } from './limit-kit.ts';

/** A backend that records each request's method and URL, and says when `n` have come. */
function recorder() {
  const seen: string[] = [];
  const waiters: Array<() => void> = [];
  const server = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    req.resume();
    res.end('from backend');
    for (const w of waiters.splice(0)) w();
  });
  const until = async (n: number) => {
    const deadline = Date.now() + 10_000;
    while (seen.length < n) {
      if (Date.now() > deadline) throw new Error(`${n} backend requests expected, got ${seen.join(', ')}`);
      await new Promise<void>((resolve) => { waiters.push(resolve); setTimeout(resolve, 500); });
    }
    return seen;
  };
  return { server, seen, until };
}

test('post_action runs after the response, unseen by the client, and is what the access log shows', async (t) => {
  const backend = recorder();
  await new Promise<void>((resolve) => backend.server.listen(0, '127.0.0.1', resolve));
  t.after(() => backend.server.close());
  const port = (backend.server.address() as AddressInfo).port;
  const conf = `
events {}
http {
    server_tokens off;
    log_format uri '$request $uri $status';
    access_log %%PREFIX%%/access.log uri;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        location / { post_action /notify; }
        location /named { post_action @notify; }
        location /notify { proxy_pass http://127.0.0.1:${port}/hit; }
        location @notify { rewrite ^ /named-hit break; proxy_pass http://127.0.0.1:${port}; }
        location /static-post { post_action /hidden.html; }
        location = /hidden.html { }
    }
}
`;
  const pair = await startPair(t, { conf, files: { 'html/index.html': 'SEE-THIS', 'html/named': 'NAMED', 'html/static-post': 'STATIC', 'html/hidden.html': 'HIDDEN' } });
  for (const uri of ['/', '/named', '/static-post']) {
    const request = `GET ${uri} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`;
    const mine = await ask(pair.gh, request);
    assert.equal(mine.status, 200, uri);
    assert.doesNotMatch(mine.body.toString(), /HIDDEN|from backend/, uri);
    if (pair.ng) assert.deepEqual(comparable(mine), comparable(await ask(pair.ng, request)), `same answer as nginx for ${uri}`);
  }
  // the backend saw each server's two proxied post actions
  const seen = await backend.until(pair.ng ? 4 : 2);
  assert.deepEqual(seen.slice().sort(), (pair.ng ? ['GET /hit', 'GET /hit', 'GET /named-hit', 'GET /named-hit'] : ['GET /hit', 'GET /named-hit']).sort());
  const lines = await waitLines(pair.gh, 'access.log', 3);
  assert.deepEqual(lines.map((l) => l.replace(/ \d+$/, '')), ['GET / HTTP/1.1 /notify', 'GET /named HTTP/1.1 /named-hit', 'GET /static-post HTTP/1.1 /hidden.html']);
  if (pair.ng) {
    const ref = await waitLines(pair.ng, 'access.log', 3);
    assert.deepEqual(lines.map((l) => l.replace(/ \d+$/, '')), ref.map((l) => l.replace(/ \d+$/, '')), 'the same access log lines as nginx');
  }
  assert.deepEqual(pair.gh.logLines().filter((l) => /\[(alert|crit|emerg)\]/.test(l)), []);
});
