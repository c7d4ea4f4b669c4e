/**
 * `zone` in an upstream block: the peers' state is shared by every worker.
 * With two workers, a server that failed once is skipped by both for
 * fail_timeout, so it sees one request in all; without a zone each worker
 * learns on its own. Reference: Debian's nginx with the same configuration.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { parseResponse, rawRequest } from '../kit/client.ts';
import type { RunningServer } from '../kit/server.ts';
import { HTTP_COMMON, RawUpstream, replyWith, response, startPair } from './upstream-kit.ts';
import type { Pair } from './upstream-kit.ts';

let bad: RawUpstream;
let good: RawUpstream;
let pair: Pair;
const stops: Array<() => unknown> = [];

before(async () => {
  bad = await RawUpstream.start(replyWith(response('bad', '502 Bad Gateway')));
  good = await RawUpstream.start(replyWith(response('good')));
  pair = await startPair({ after: (fn) => { stops.push(fn); } }, { conf: `
worker_processes 2;
events {}
http {
${HTTP_COMMON}
    upstream shared {
        zone shared 64k;
        server ${bad.address} max_fails=1 fail_timeout=30s;
        server ${good.address};
    }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location / { proxy_pass http://shared; proxy_next_upstream error http_502; }
    }
}
` });
});

after(async () => {
  await Promise.all(stops.map((s) => s()));
  await bad.close();
  await good.close();
});

async function run(srv: RunningServer): Promise<{ bodies: string[]; badHits: number }> {
  const before = bad.requests.length;
  const bodies: string[] = [];
  for (let i = 0; i < 24; i++) {
    const r = parseResponse(await rawRequest(srv.port(8080), 'GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'));
    bodies.push(r.body.toString());
  }
  return { bodies, badHits: bad.requests.length - before };
}

test('a failure seen by one worker makes every worker skip the server', async () => {
  for (const srv of [pair.gh, pair.ng]) {
    if (!srv) continue;
    const { bodies, badHits } = await run(srv);
    assert.ok(bodies.every((b) => b === 'good'), 'every client got the good server\'s answer');
    assert.equal(badHits, 1, 'the failing server was tried once, by one worker, for all');
  }
});
