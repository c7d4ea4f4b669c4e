/**
 * limit_conn against Debian's nginx 1.22 (the reference): requests in
 * progress held by an upstream that answers only when told, the rejection
 * status and log lines (levels, dry run), $limit_conn_status, counts given
 * back when a request ends — answered, on a keepalive connection, or
 * abandoned by its client — an internal redirect not counted twice, one
 * zone for several workers, and configuration errors.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KeepAliveClient } from '../kit/client.ts';
import { HoldingBackend, binaries, confTest, get, logged, loggedBy, startBoth, waitLines } from './limit-kit.ts';

const conf = (backend: number, workers = 1) => `
worker_processes ${workers};
events {}
http {
    limit_conn_zone $binary_remote_addr zone=addr:1m;
    limit_conn_zone $binary_remote_addr zone=other:1m;
    limit_conn_zone $arg_k zone=bykey:1m;
    log_format st '$uri $status $limit_conn_status';
    access_log %%PREFIX%%/access.log st;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        add_header X-Conn $limit_conn_status always;

        location /hold { limit_conn addr 1; proxy_pass http://127.0.0.1:${backend}; }
        location /one { limit_conn addr 1; }
        location /custom { limit_conn addr 1; limit_conn_status 429; limit_conn_log_level warn; }
        location /dry { limit_conn addr 1; limit_conn_dry_run on; }
        location /other { limit_conn other 1; }
        location /two { limit_conn addr 2; }
        location /both { limit_conn other 1; limit_conn addr 1; }
        location /bykey { limit_conn bykey 1; }
        location /redirect { limit_conn addr 1; error_page 404 = /one; }
        location /plain { }
    }
}
`;

const files = {
  'html/one': '1\n', 'html/custom': 'C\n', 'html/dry': 'D\n', 'html/other': 'O\n', 'html/two': '2\n',
  'html/both': 'B\n', 'html/bykey': 'K\n', 'html/plain': 'P\n',
};

async function backend(t: { after(fn: () => Promise<void>): void }): Promise<HoldingBackend> {
  const b = new HoldingBackend();
  await b.listen();
  t.after(() => b.close());
  return b;
}

test('requests in progress are counted; statuses, variables and log lines as nginx', async (t) => {
  const up = await backend(t);
  const results: Array<{ seen: string[]; log: string[]; access: string[] }> = [];
  for (const srv of await startBoth(t, { conf: conf(up.port), files })) {
    const seen: string[] = [];
    const ask = async (target: string) => {
      const r = await get(srv, target);
      seen.push(`${target} ${r.status} ${r.header('x-conn') ?? '-'}`);
    };
    const held = KeepAliveClient.connect(srv.port(8080));
    const holder = await held;
    await holder.send('GET /hold HTTP/1.0\r\nHost: localhost\r\n\r\n');
    await up.waitHeld(1);
    for (const target of ['/one', '/custom', '/dry', '/other', '/two', '/both', '/bykey', '/bykey?k=a', '/redirect', '/plain']) await ask(target);
    up.releaseAll();
    const answer = await holder.readResponse();
    seen.push(`/hold ${answer.status} ${answer.header('x-conn')}`);
    await holder.close();
    await srv.waitForLog('access.log', /^\/hold 200/m);
    // given back: the same requests pass now
    for (const target of ['/one', '/custom', '/both', '/redirect']) await ask(target);
    results.push({ seen, log: logged(srv, /limiting connections/), access: await waitLines(srv, 'access.log', 15) });
  }
  const [gh, ng] = results;
  assert.deepEqual(gh.seen, [
    '/one 503 REJECTED', '/custom 429 REJECTED', '/dry 200 REJECTED_DRY_RUN', '/other 200 PASSED', '/two 200 PASSED',
    '/both 503 REJECTED', '/bykey 200 -', '/bykey?k=a 200 PASSED', '/redirect 503 REJECTED', '/plain 200 -',
    '/hold 200 PASSED',
    '/one 200 PASSED', '/custom 200 PASSED', '/both 200 PASSED', '/redirect 200 PASSED',
  ]);
  const suffix = (uri: string) => `, client: 127.0.0.1, server: localhost, request: "GET ${uri} HTTP/1.0", host: "localhost"`;
  assert.deepEqual(gh.log, [
    `[error] limiting connections by zone "addr"${suffix('/one')}`,
    `[warn] limiting connections by zone "addr"${suffix('/custom')}`,
    `[error] limiting connections, dry run, by zone "addr"${suffix('/dry')}`,
    `[error] limiting connections by zone "addr"${suffix('/both')}`,
    `[error] limiting connections by zone "addr"${suffix('/redirect')}`,
  ]);
  if (ng) {
    assert.deepEqual(gh.seen, ng.seen);
    assert.deepEqual(gh.log, ng.log);
    assert.deepEqual(gh.access.toSorted(), ng.access.toSorted());
  }
});

test('every request of a keepalive connection gives its count back', async (t) => {
  const up = await backend(t);
  for (const srv of await startBoth(t, { conf: conf(up.port), files })) {
    const c = await KeepAliveClient.connect(srv.port(8080));
    t.after(() => c.close());
    for (let i = 0; i < 5; i++) {
      await c.send('GET /one HTTP/1.1\r\nHost: localhost\r\n\r\n');
      const r = await c.readResponse();
      assert.equal(r.status, 200, `${srv.flavor}: request ${i + 1}`);
    }
  }
});

test('a request its client abandons gives its count back', async (t) => {
  const up = await backend(t);
  for (const srv of await startBoth(t, { conf: conf(up.port), files })) {
    const c = await KeepAliveClient.connect(srv.port(8080));
    await c.send('GET /hold HTTP/1.1\r\nHost: localhost\r\n\r\n');
    await up.waitHeld(1);
    assert.equal((await get(srv, '/one')).status, 503);
    await c.close();
    await srv.waitForLog('access.log', /^\/hold 499 PASSED/m);
    assert.equal((await get(srv, '/one')).status, 200, srv.flavor);
    up.releaseAll();
  }
});

test('one zone for every worker', async (t) => {
  const up = await backend(t);
  for (const srv of await startBoth(t, { conf: conf(up.port, 2), files })) {
    const holder = await KeepAliveClient.connect(srv.port(8080));
    await holder.send('GET /hold HTTP/1.0\r\nHost: localhost\r\n\r\n');
    await up.waitHeld(1);
    const statuses: number[] = [];
    // each request on its own connection: the kernel spreads them over both workers' sockets
    for (let i = 0; i < 20; i++) statuses.push((await get(srv, '/one')).status);
    assert.deepEqual(statuses, Array(20).fill(503), srv.flavor);
    if (srv.flavor === 'gatehouse') assert.equal(loggedBy(srv, /limiting connections/).size, 2, 'both workers rejected requests');
    up.releaseAll();
    assert.equal((await holder.readResponse()).status, 200);
    await holder.close();
    await srv.waitForLog('access.log', /^\/hold 200/m);
    assert.equal((await get(srv, '/one')).status, 200);
  }
});

test('configuration errors as nginx -t reports them', () => {
  const http = (body: string) => `events {} http { access_log off; ${body} }`;
  const zone = 'limit_conn_zone $binary_remote_addr zone=one:1m;';
  const cases: Array<[string, string]> = [
    [http('limit_conn_zone $binary_remote_addr zone=one:10k;'), 'zone "zone=one:10k" is too small in PREFIX/nginx.conf:1'],
    [http('limit_conn_zone $binary_remote_addr zone=one;'), 'invalid zone size "zone=one" in PREFIX/nginx.conf:1'],
    [http('limit_conn_zone $binary_remote_addr one;'), 'invalid parameter "one" in PREFIX/nginx.conf:1'],
    [http(`${zone} limit_conn one 0;`), 'invalid number of connections "0" in PREFIX/nginx.conf:1'],
    [http(`${zone} limit_conn one 65536;`), 'connection limit must be less 65536 in PREFIX/nginx.conf:1'],
    [http(`${zone} limit_conn one 1; limit_conn one 2;`), '"limit_conn" directive is duplicate in PREFIX/nginx.conf:1'],
    [http(`${zone} limit_conn_zone $uri zone=one:2m;`), 'the size 2097152 of shared memory zone "one" conflicts with already declared size 1048576 in PREFIX/nginx.conf:1'],
    [http(`${zone} limit_conn_zone $uri zone=one:1m;`), 'limit_conn_zone "one" is already bound to key "$binary_remote_addr" in PREFIX/nginx.conf:1'],
    [http('limit_conn two 1;'), 'zero size shared memory zone "two"'],
    [http('limit_conn_status 399;'), 'value must be between 400 and 599 in PREFIX/nginx.conf:1'],
    [http('limit_conn_log_level crit;'), 'invalid value "crit" in PREFIX/nginx.conf:1'],
    [http(`${zone} server { location / { limit_conn one 1; limit_conn_status 444; limit_conn_dry_run on; } }`), ''],
  ];
  for (const [name, binary] of binaries()) {
    for (const [text, expected] of cases) assert.deepEqual(confTest(binary, text), expected ? [expected] : [], `${name}: ${text}`);
  }
});
