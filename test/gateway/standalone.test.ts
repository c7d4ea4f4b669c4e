/**
 * Standalone mode (deployment.role: data_plane, config_provider: yaml), as
 * APISIX's: routes come from conf/apisix.yaml, re-read when it changes; a
 * file without its `#END` line, or one that does not parse, leaves the last
 * good configuration serving; an invalid item is skipped with APISIX's
 * error line while the rest applies; `${{VAR}}` comes from the environment;
 * (declared in nginx_config.envs, as workers keep only those); no Admin API
 * is served.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { freePorts } from '../kit/server.ts';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, startOrigin } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';

let gw: Gateway;
let a: Origin;
let b: Origin;
let prefix: string;
let yamlFile: string;
let errorLog: string;
let adminPort: number;

/** Writes apisix.yaml with a modification time later than the last one (the file is re-read by mtime). */
let stamp = Date.now() / 1000;
function writeRoutes(text: string): void {
  fs.writeFileSync(yamlFile, text);
  stamp += 2;
  fs.utimesSync(yamlFile, stamp, stamp);
}

/**
 * Every worker re-reads the file on its own (as APISIX's do), each within a
 * second: waits until `ok` holds for 10 requests in a row (new connections,
 * spread over the workers).
 */
async function untilEveryWorker(path: string, ok: (r: Awaited<ReturnType<typeof proxy>>) => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  let inARow = 0;
  while (inARow < 10) {
    const r = await proxy(gw, path);
    inARow = ok(r) ? inARow + 1 : 0;
    if (Date.now() > deadline) throw new Error(`${path} not as expected on every worker within ${ms} ms: ${r.status} ${r.body}`);
  }
}

/** Waits until the error log has a line matching `re` (the file is re-read each second). */
async function logLine(re: RegExp, ms = 10_000): Promise<string> {
  const deadline = Date.now() + ms;
  for (;;) {
    const text = fs.existsSync(errorLog) ? fs.readFileSync(errorLog, 'utf8') : '';
    const line = text.split('\n').find((l) => re.test(l));
    if (line) return line;
    if (Date.now() > deadline) throw new Error(`no ${re} in error.log:\n${text}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

before(async () => {
  a = await startOrigin();
  b = await startOrigin();
  prefix = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-standalone-'));
  const [admin, proxyPort] = await freePorts(2);
  adminPort = admin;
  fs.mkdirSync(path.join(prefix, 'conf'), { recursive: true });
  fs.writeFileSync(path.join(prefix, 'ports'), `${admin} ${proxyPort}`);
  fs.writeFileSync(path.join(prefix, 'conf', 'config.yaml'), `apisix:
  node_listen:
    - ip: 127.0.0.1
      port: ${proxyPort}
  enable_control: false
nginx_config:
  envs:
    - GH_TEST_ORIGIN_B
  worker_processes: 2
  error_log_level: info
deployment:
  role: data_plane
  role_data_plane:
    config_provider: yaml
  admin:
    admin_listen:
      ip: 127.0.0.1
      port: ${admin}
`);
  yamlFile = path.join(prefix, 'conf', 'apisix.yaml');
  errorLog = path.join(prefix, 'logs', 'error.log');
  process.env.GH_TEST_ORIGIN_B = String(b.port);
  writeRoutes(`upstreams:
  - id: 1
    nodes:
      "127.0.0.1:${a.port}": 1
    type: roundrobin
routes:
  - id: r1
    uri: /a
    upstream_id: 1
  - id: r2
    uri: /b
    upstream:
      nodes:
        - host: 127.0.0.1
          port: \${{GH_TEST_ORIGIN_B}}
          weight: 1
      type: roundrobin
  - id: keyed
    uri: /keyed
    plugins:
      key-auth: {}
    upstream_id: 1
consumers:
  - username: jack
    plugins:
      key-auth:
        key: jack-key
#END
`);
  gw = await startGateway({ prefix });
});

after(async () => {
  await gw?.stop();
  await a?.close();
  await b?.close();
});

test('routes, upstreams and consumers come from conf/apisix.yaml, ${{VAR}} from the environment', async () => {
  await untilEveryWorker('/a', (r) => r.status === 200 && r.echo?.port === a.port);
  const rb = await proxy(gw, '/b');
  assert.equal(rb.status, 200);
  assert.equal(rb.echo?.port, b.port);
  assert.equal((await proxy(gw, '/keyed')).status, 401);
  const keyed = await proxy(gw, '/keyed', { headers: { apikey: 'jack-key' } });
  assert.equal(keyed.status, 200);
  const none = await proxy(gw, '/none');
  assert.equal(none.status, 404);
  assert.equal(none.body, '{"error_msg":"404 Route Not Found"}\n');
});

test('a data plane serves no Admin API', async () => {
  const refused = await new Promise<boolean>((resolve) => {
    const s = net.connect(adminPort, '127.0.0.1');
    s.once('connect', () => { s.destroy(); resolve(false); });
    s.once('error', () => resolve(true));
  });
  assert.equal(refused, true);
});

test('a changed file is applied without a reload; invalid items are skipped and logged', async () => {
  writeRoutes(`upstreams:
  - id: 1
    nodes:
      "127.0.0.1:${b.port}": 1
    type: roundrobin
routes:
  - id: r1
    uri: /a
    upstream_id: 1
  - id: bad
    uri: /bad
    methods: [FETCH]
    upstream_id: 1
  - id: dangling
    uri: /dangling
    upstream_id: 404
  - id: r3
    uri: /c
    upstream_id: 1
#END
`);
  await untilEveryWorker('/c', (r) => r.status === 200 && r.echo?.port === b.port);
  await untilEveryWorker('/a', (r) => r.echo?.port === b.port);
  // gone from the file: gone from the gateway
  await untilEveryWorker('/b', (r) => r.status === 404);
  assert.equal((await proxy(gw, '/bad')).status, 404);
  assert.equal((await proxy(gw, '/dangling')).status, 404);
  assert.match(await logLine(/failed to check item data of \[routes\] err:invalid configuration: property "methods" validation failed/), /"id":"bad"/);
  assert.match(await logLine(/failed to check item data of \[routes\] err:failed to fetch upstream info by upstream id \[404\]/), /"id":"dangling"/);
  await logLine(/config file .*apisix\.yaml reloaded\./);
});

test('a file without #END, or one that does not parse, leaves the last configuration serving', async () => {
  writeRoutes(`routes:
  - id: r4
    uri: /d
    upstream_id: 1
`);
  await logLine(/failed to parse the content of file .*apisix\.yaml: missing valid end flag in file/);
  // both workers have seen the file (each logs its refusal)
  await logLine(/#2: failed to parse the content of file .*missing valid end flag/);
  await logLine(/#1: failed to parse the content of file .*missing valid end flag/);
  await untilEveryWorker('/d', (r) => r.status === 404);
  await untilEveryWorker('/c', (r) => r.status === 200);
  writeRoutes('routes: [ {\n#END\n');
  await logLine(/failed to parse the content of file .*apisix\.yaml: (?!missing)/);
  assert.equal((await proxy(gw, '/c')).status, 200);
});
