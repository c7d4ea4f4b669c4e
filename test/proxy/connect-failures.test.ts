// How a failed connect to an upstream is logged (src/upstream/connect-failure.ts): when connect()
// itself fails (a unix socket that is not there) nginx names the peer, at crit unless the network
// refused; a TCP refusal, found after the handshake started, is the plain `connect() failed`.
// Reference: Debian's nginx 1.22 on the same configuration.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { startPair } from '../kit/pair.ts';
import type { RunningServer } from '../kit/server.ts';
import { ask } from '../lua/hooks-kit.ts';

const pair = await startPair({ after }, {
  conf: `events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location /missing { proxy_pass http://unix:%%PREFIX%%/none.sock:/; }
        location /refused { proxy_pass http://127.0.0.1:%%PORT_8083%%; }
    }
}
`,
});

/** The error.log line for `uri`, with the server's own prefix and port named. */
async function lineFor(srv: RunningServer, uri: string): Promise<string> {
  const re = new RegExp(`connect\\(\\).*"GET ${uri} `);
  await srv.waitForLog('error.log', re, 10_000);
  const line = srv.readFile('error.log').split('\n').find((l) => re.test(l))!;
  return line.replace(/^\S+ \S+ (\[\w+\]) \d+#\d+: \*\d+ /, '$1 ')
    .split(srv.prefix.replace(/\/$/, '')).join('PREFIX').split(String(srv.port(8083))).join('P8083');
}

async function same(uri: string): Promise<string> {
  assert.equal((await ask(pair.gh, uri)).status, 502);
  const gh = await lineFor(pair.gh, uri);
  if (pair.ng) {
    assert.equal((await ask(pair.ng, uri)).status, 502);
    assert.equal(gh, await lineFor(pair.ng, uri));
  }
  return gh;
}

test('a unix socket that is not there: connect() names it, at crit', async () => {
  assert.match(await same('/missing'), /^\[crit\] connect\(\) to unix:PREFIX\/none\.sock failed \(2: No such file or directory\) while connecting to upstream, /);
});

test('a refused TCP peer: the plain "connect() failed", at error', async () => {
  assert.match(await same('/refused'), /^\[error\] connect\(\) failed \(111: Connection refused\) while connecting to upstream, .*upstream: "http:\/\/127\.0\.0\.1:P8083\/refused"/);
});
