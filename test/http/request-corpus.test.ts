/**
 * Request reading that holds: a corpus of malformed, ambiguous and
 * smuggling-shaped requests (request-corpus-cases.ts) sent to Gatehouse and
 * to Debian's nginx 1.22, both proxying to one origin that records what it
 * receives. For each case the response bytes, how the connection ended, the
 * requests the origin received and the access-log lines must be the same.
 * One server pair for the whole corpus; cases run concurrently in bounded
 * batches, each on its own connection, and nothing waits for time: the
 * client half-closes after its request and reads until the server closes.
 * Without nginx, each case still checks that Gatehouse answers and closes.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { nginxSkip, startGatehouse, startNginx } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { accessByAddress, bounded, caseAddress, comparable, exchange, outcome, RecordingOrigin } from './request-corpus-kit.ts';
import type { ClientExchange, Outcome } from './request-corpus-kit.ts';
import { corpusCases } from './request-corpus-cases.ts';

const conf = (originPort: number) => `
events {}
http {
    log_format corpus '$remote_addr $status $body_bytes_sent "$request"';
    access_log %%PREFIX%%/access.log corpus;
    client_header_buffer_size 1k;
    large_client_header_buffers 4 2k;
    client_max_body_size 100k;
    # the client half-closes after its request: that is not an abort here
    proxy_ignore_client_abort on;
    proxy_set_header X-Client "$remote_addr $server_port";
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location / { proxy_pass http://127.0.0.1:${originPort}; }
        location /ws {
            proxy_pass http://127.0.0.1:${originPort};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection upgrade;
            proxy_set_header X-Client "$remote_addr $server_port";
        }
    }
}
`;

const cases = corpusCases();
const origin = new RecordingOrigin();
const servers: RunningServer[] = [];
const results = new Map<string, { gh: Outcome; ng: Outcome | undefined }>();
/** Connections open at once, per server. */
const CONCURRENCY = 24;

before(async () => {
  const names = new Set(cases.map((c) => c.name));
  assert.equal(names.size, cases.length, 'case names are unique');
  // a loaded machine (the full suite runs files in parallel) can take more than the default 10 s to start
  const opts = { conf: conf(await origin.listen()), errorLogLevel: 'info', timeoutMs: 30_000 };
  const gh = await startGatehouse(opts);
  servers.push(gh);
  const ng = nginxSkip ? undefined : await startNginx(opts);
  if (ng) servers.push(ng);
  const run = (srv: RunningServer | undefined, c: (typeof cases)[number]): Promise<ClientExchange | undefined> =>
    srv ? exchange(srv.port(8080), c) : Promise.resolve(undefined);
  const seen = await bounded(cases, CONCURRENCY, (c) => Promise.all([run(gh, c), run(ng, c)]));
  // a last request, logged after the lines of the connections that closed before it
  const last = { name: 'last', parts: 'GET /corpus-end HTTP/1.0\r\n\r\n', from: caseAddress(cases.length) };
  for (const srv of servers) {
    await exchange(srv.port(8080), last);
    await srv.waitForLog('access.log', /"GET \/corpus-end HTTP\/1\.0"$/m);
  }
  const ghAccess = accessByAddress(gh);
  const ngAccess = ng ? accessByAddress(ng) : undefined;
  cases.forEach((c, i) => {
    const [mine, ref] = seen[i];
    results.set(c.name, {
      gh: comparable(outcome(c, gh, mine!, origin, ghAccess), c),
      ng: ref ? comparable(outcome(c, ng!, ref, origin, ngAccess!), c) : undefined,
    });
  });
});

after(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  await origin.close();
});

for (const c of cases) {
  test(c.name, { todo: c.todo }, () => {
    const { gh, ng } = results.get(c.name)!;
    if (ng) assert.deepEqual(gh, ng, `Gatehouse (actual) and nginx (expected) for ${JSON.stringify(c.parts).slice(0, 160)}`);
    else assert.equal(gh.end === 'close' || gh.end === 'reset', true);
  });
}
