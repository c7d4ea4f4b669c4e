/**
 * limit_req against Debian's nginx 1.22 (the reference): the statuses of a
 * burst, nodelay / delay / dry run, $limit_req_status, inheritance, the
 * error log lines and their levels, a delayed request really waiting on a
 * timer (the worker answers others meanwhile) and a client leaving during
 * the delay, one zone for several workers, zone state across reloads, the
 * least recently used key dropped from a full zone, and configuration
 * errors. Rates of 1r/m drain 1/60 request per second, so the counts do not
 * depend on how fast the machine is.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KeepAliveClient } from '../kit/client.ts';
import { startGatehouse } from '../kit/server.ts';
import { binaries, confTest, get, logged, loggedBy, startBoth } from './limit-kit.ts';

const burstConf = `
events {}
http {
    limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;
    limit_req_zone $arg_k zone=bykey:1m rate=1r/m;
    limit_req_zone $arg_s zone=server:1m rate=1r/m;
    log_format st '$uri $status $limit_req_status';
    access_log %%PREFIX%%/access.log st;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        limit_req zone=server;
        add_header X-Limit $limit_req_status always;

        location /nodelay { limit_req zone=one burst=2 nodelay; }
        location /status { limit_req zone=bykey; limit_req_status 429; limit_req_log_level warn; }
        location /dry { limit_req zone=bykey burst=1; limit_req_dry_run on; }
        location /inherit { }
        location /none { limit_req_log_level info; }
    }
}
`;

const files = {
  'html/nodelay': 'N\n', 'html/status': 'S\n', 'html/dry': 'D\n', 'html/inherit': 'I\n', 'html/none': 'O\n',
};

const EXCESS = /excess: (\d+\.\d{3})/;

test('a burst: statuses, $limit_req_status, log lines and levels as nginx', async (t) => {
  const results: Array<{ seen: string[]; log: string[]; access: string[] }> = [];
  for (const srv of await startBoth(t, { conf: burstConf, files })) {
    const seen: string[] = [];
    const ask = async (target: string) => {
      const r = await get(srv, target);
      seen.push(`${target} ${r.status} ${r.header('x-limit') ?? '-'}`);
    };
    for (let i = 0; i < 5; i++) await ask('/nodelay');
    for (let i = 0; i < 2; i++) await ask('/status?k=a');
    for (let i = 0; i < 3; i++) await ask('/status');
    for (let i = 0; i < 3; i++) await ask('/dry?k=d');
    for (let i = 0; i < 2; i++) await ask('/inherit?s=x');
    for (let i = 0; i < 2; i++) await ask('/none?s=y');
    const log = logged(srv, /limiting|delaying/);
    for (const line of log) {
      // the excess of a rejected request is above the burst and at most one request more
      const m = EXCESS.exec(line);
      assert.ok(m, line);
      if (/limiting requests, excess/.test(line) && line.includes('"one"')) assert.ok(+m[1] > 2 && +m[1] <= 3, line);
    }
    await srv.waitForLog('access.log', /\/none 503/);
    results.push({ seen, log: log.map((l) => l.replace(EXCESS, 'excess: N')), access: srv.logLines('access.log') });
  }
  const [gh, ng] = results;
  assert.deepEqual(gh.seen, [
    '/nodelay 200 PASSED', '/nodelay 200 PASSED', '/nodelay 200 PASSED', '/nodelay 503 REJECTED', '/nodelay 503 REJECTED',
    '/status?k=a 200 PASSED', '/status?k=a 429 REJECTED',
    '/status 200 -', '/status 200 -', '/status 200 -',
    '/dry?k=d 200 PASSED', '/dry?k=d 200 DELAYED_DRY_RUN', '/dry?k=d 200 REJECTED_DRY_RUN',
    '/inherit?s=x 200 PASSED', '/inherit?s=x 503 REJECTED',
    '/none?s=y 200 PASSED', '/none?s=y 503 REJECTED',
  ]);
  assert.ok(gh.log.includes('[warn] limiting requests, excess: N by zone "bykey", client: 127.0.0.1, server: localhost, request: "GET /status?k=a HTTP/1.0", host: "localhost"'), gh.log.join('\n'));
  assert.ok(gh.log.includes('[warn] delaying request, dry run, excess: N, by zone "bykey", client: 127.0.0.1, server: localhost, request: "GET /dry?k=d HTTP/1.0", host: "localhost"'), gh.log.join('\n'));
  assert.ok(gh.log.includes('[info] limiting requests, excess: N by zone "server", client: 127.0.0.1, server: localhost, request: "GET /none?s=y HTTP/1.0", host: "localhost"'), gh.log.join('\n'));
  assert.equal(gh.access.length, 17);
  assert.equal(gh.access[12], '/dry 200 REJECTED_DRY_RUN');
  if (ng) {
    assert.deepEqual(gh.seen, ng.seen);
    assert.deepEqual(gh.log, ng.log);
    assert.deepEqual(gh.access, ng.access);
  }
});

const delayConf = `
events {}
http {
    limit_req_zone $binary_remote_addr zone=d:1m rate=30r/m;
    limit_req_zone $binary_remote_addr zone=slow:1m rate=1r/m;
    log_format st '$uri $status $limit_req_status';
    access_log %%PREFIX%%/access.log st;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        location /d { limit_req zone=d burst=1; }
        location /slow { limit_req zone=slow burst=5; }
    }
}
`;

test('a delayed request waits on a timer while the worker serves others', async (t) => {
  for (const srv of await startBoth(t, { conf: `worker_processes 1;\n${delayConf}`, files: { 'html/d': 'D\n', 'html/slow': 'S\n' } })) {
    assert.equal((await get(srv, '/d')).status, 200);
    const c = await KeepAliveClient.connect(srv.port(8080));
    t.after(() => c.close());
    await c.send('GET /d HTTP/1.1\r\nHost: localhost\r\n\r\n');
    // 30r/m: one request over the rate waits about two seconds
    const line = await srv.waitForLog('error.log', /delaying request, excess: [01]\.\d{3}, by zone "d"/);
    assert.match(line, /\[warn\]/);
    // meanwhile: a third request is over the burst and answered at once
    assert.equal((await get(srv, '/d')).status, 503);
    assert.equal(c.buffered().length, 0, `${srv.flavor}: the delayed request is not answered yet`);
    const r = await c.readResponse({ timeoutMs: 10000 });
    assert.equal(r.status, 200);
    assert.equal(r.body.toString(), 'D\n');
    await srv.waitForLog('access.log', /\/d 200 DELAYED/);
  }
});

test('a client that leaves during the delay ends the request (499)', async (t) => {
  for (const srv of await startBoth(t, { conf: delayConf, files: { 'html/d': 'D\n', 'html/slow': 'S\n' } })) {
    assert.equal((await get(srv, '/slow')).status, 200);
    const c = await KeepAliveClient.connect(srv.port(8080));
    await c.send('GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n');
    // 1r/m drains one thousandth of a request every 60 ms, so a slow turn between the two requests reads 0.999 or less
    await srv.waitForLog('error.log', /delaying request, excess: (1\.000|0\.9\d\d), by zone "slow"/);
    await c.close();
    await srv.waitForLog('access.log', /\/slow 499 DELAYED/);
    assert.equal(logged(srv, /client prematurely closed connection/).length, 1, srv.flavor);
  }
});

test('one zone for every worker', async (t) => {
  const conf = `
worker_processes 2;
events {}
http {
    limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location / { limit_req zone=one burst=4 nodelay; root %%PREFIX%%/html; }
    }
}
`;
  for (const srv of await startBoth(t, { conf, files: { 'html/index.html': 'x\n' } })) {
    const statuses: number[] = [];
    // each request on its own connection: the kernel spreads them over both workers' sockets
    for (let i = 0; i < 30; i++) statuses.push((await get(srv, '/')).status);
    assert.equal(statuses.filter((s) => s === 200).length, 5, `${srv.flavor}: ${statuses.join(' ')}`);
    assert.equal(statuses.filter((s) => s === 503).length, 25);
    // reuseport spreads connections over both workers (nginx's shared socket may not)
    if (srv.flavor === 'gatehouse') assert.equal(loggedBy(srv, /limiting requests/).size, 2, 'both workers rejected requests');
  }
});

test('a reload keeps the zone unless its size changes; a changed key is refused', async (t) => {
  const conf = (size: string, key: string) => `
events {}
http {
    limit_req_zone ${key} zone=one:${size} rate=1r/m;
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location / { limit_req zone=one; root %%PREFIX%%/html; }
    }
}
`;
  for (const srv of await startBoth(t, { conf: conf('1m', '$binary_remote_addr'), files: { 'html/index.html': 'x\n' } })) {
    assert.equal((await get(srv, '/')).status, 200);
    assert.equal((await get(srv, '/')).status, 503);
    srv.writeConf(conf('1m', '$binary_remote_addr'));
    await srv.reload();
    assert.equal((await get(srv, '/')).status, 503, `${srv.flavor}: the state survived the reload`);
    srv.writeConf(conf('1m', '$remote_addr'));
    const refused = await srv.reload();
    assert.match(refused, /\[emerg\] .*limit_req "one" uses the "\$remote_addr" key while previously it used the "\$binary_remote_addr" key/);
    assert.equal((await get(srv, '/')).status, 503);
    srv.writeConf(conf('2m', '$remote_addr'));
    await srv.reload();
    assert.equal((await get(srv, '/')).status, 200, `${srv.flavor}: a new size is a new zone`);
  }
});

test('a full zone drops its least recently used keys', async (t) => {
  const conf = `
events {}
http {
    limit_req_zone $arg_k zone=small:32k rate=1r/m;
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location / { limit_req zone=small; root %%PREFIX%%/html; }
    }
}
`;
  for (const srv of await startBoth(t, { conf, files: { 'html/index.html': 'x\n' } })) {
    const c = await KeepAliveClient.connect(srv.port(8080));
    t.after(() => c.close());
    const status = async (k: number) => {
      await c.send(`GET /?k=${k} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
      return (await c.readResponse()).status;
    };
    // far more keys than 32k hold (nginx: about 200 states, Gatehouse: 251)
    for (let k = 0; k < 600; k++) assert.equal(await status(k), 200);
    assert.equal(await status(599), 503, `${srv.flavor}: the newest key is still there`);
    assert.equal(await status(0), 200, `${srv.flavor}: the oldest key was dropped`);
    assert.equal(logged(srv, /\[alert\]/).length, 0);
  }
});

test('configuration errors as nginx -t reports them', () => {
  const http = (body: string) => `events {} http { access_log off; ${body} }`;
  const cases: Array<[string, string]> = [
    [http('limit_req_zone $binary_remote_addr zone=one:10k rate=1r/s;'), 'zone "zone=one:10k" is too small in PREFIX/nginx.conf:1'],
    [http('limit_req_zone $binary_remote_addr zone=one rate=1r/s;'), 'invalid zone size "zone=one" in PREFIX/nginx.conf:1'],
    [http('limit_req_zone $binary_remote_addr zone=one:1m rate=1r/h;'), 'invalid rate "rate=1r/h" in PREFIX/nginx.conf:1'],
    [http('limit_req_zone $binary_remote_addr zone=one:1m rate=0r/s;'), 'invalid rate "rate=0r/s" in PREFIX/nginx.conf:1'],
    [http('limit_req_zone $binary_remote_addr zone=:1m rate=1r/s;'), '"limit_req_zone" must have "zone" parameter in PREFIX/nginx.conf:1'],
    [http('limit_req_zone $binary_remote_addr zone=one:1m rate=1r/s; limit_req_zone $uri zone=one:1m rate=1r/s;'), 'limit_req_zone "one" is already bound to key "$binary_remote_addr" in PREFIX/nginx.conf:1'],
    [http('limit_req_zone $binary_remote_addr zone=one:1m rate=1r/s; limit_conn_zone $uri zone=one:1m;'), 'the shared memory zone "one" is already declared for a different use in PREFIX/nginx.conf:1'],
    [http('limit_req_zone $binary_remote_addr zone=one:1m rate=1r/s; limit_req zone=one burst=0;'), 'invalid burst value "burst=0" in PREFIX/nginx.conf:1'],
    [http('limit_req_zone $binary_remote_addr zone=one:1m rate=1r/s; limit_req zone=one delay=x;'), 'invalid delay value "delay=x" in PREFIX/nginx.conf:1'],
    [http('limit_req_zone $binary_remote_addr zone=one:1m rate=1r/s; limit_req zone=one fast;'), 'invalid parameter "fast" in PREFIX/nginx.conf:1'],
    [http('limit_req burst=2;'), '"limit_req" must have "zone" parameter in PREFIX/nginx.conf:1'],
    [http('limit_req_zone $binary_remote_addr zone=one:1m rate=1r/s; limit_req zone=one; limit_req zone=one;'), '"limit_req" directive is duplicate in PREFIX/nginx.conf:1'],
    [http('limit_req zone=two;'), 'zero size shared memory zone "two"'],
    [http('limit_req_status 600;'), 'value must be between 400 and 599 in PREFIX/nginx.conf:1'],
    [http('limit_req_log_level debug;'), 'invalid value "debug" in PREFIX/nginx.conf:1'],
    [http('limit_req_dry_run on; limit_req_dry_run off;'), '"limit_req_dry_run" directive is duplicate in PREFIX/nginx.conf:1'],
  ];
  for (const [name, binary] of binaries()) {
    for (const [conf, expected] of cases) assert.deepEqual(confTest(binary, conf), [expected], `${name}: ${conf}`);
  }
  // nginx Plus's `sync` is accepted (a single node has nothing to synchronize)
  assert.deepEqual(confTest(binaries()[0][1], http('limit_req_zone $binary_remote_addr zone=one:1m rate=1r/s sync;')), []);
});

test('requests pass again as the bucket drains (gatehouse)', async (t) => {
  // 1000r/s: the excess of one request drains within a few milliseconds
  const conf = `
events {}
http {
    limit_req_zone $binary_remote_addr zone=fast:1m rate=1000r/s;
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location / { limit_req zone=fast nodelay; root %%PREFIX%%/html; }
    }
}
`;
  const srv = await startGatehouse({ conf, files: { 'html/index.html': 'x\n' } });
  t.after(() => srv.stop());
  assert.equal((await get(srv, '/')).status, 200);
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal((await get(srv, '/')).status, 200);
});
