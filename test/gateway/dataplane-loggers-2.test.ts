/**
 * More loggers send their entries: loki-logger, elasticsearch-logger and
 * clickhouse-logger to one loopback HTTP receiver that answers as Loki,
 * Elasticsearch (its version on GET, 200 on _bulk) and ClickHouse would,
 * each after real requests through the gateway; and the Admin API refusing
 * their bad confs with APISIX's messages. Waits are for the receiver
 * getting data, never for a fixed time.
 */
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';
import { Inbox } from './inbox.ts';

interface Got { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }
type Entry = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let gw: Gateway;
let origin: Origin;
let receiver: http.Server;
let syslogTcp: net.Server;
let syslogUdp: dgram.Socket;
/** What the syslog receivers got: TCP as the bytes of each read, UDP a datagram each. */
const tcpData = new Inbox<Got>();
const udpData = new Inbox<Got>();
const boxes = new Map<string, Inbox<Got>>();
const inbox = (p: string) => {
  let b = boxes.get(p);
  if (!b) boxes.set(p, (b = new Inbox<Got>()));
  return b;
};
/** Statuses to answer on a path before the usual answer. */
const failFirst = new Map<string, number[]>();

/** The answer a real server would give: ES's version document on GET, Loki's 204, else 200. */
function answer(req: http.IncomingMessage, p: string): [number, string] {
  const forced = failFirst.get(p)?.shift();
  if (forced !== undefined) return [forced, p.startsWith('/services') ? JSON.stringify({ text: 'Invalid token', code: 4 }) : 'not now'];
  if (req.method === 'GET' && p.startsWith('/es')) return [200, JSON.stringify({ name: 'fake', version: { number: p === '/es6' ? '6.8.23' : '8.11.0' }, tagline: 'You Know, for Search' })];
  if (p.endsWith('/_bulk')) return [200, JSON.stringify({ took: 1, errors: false, items: [] })];
  if (p.startsWith('/loki')) return [204, ''];
  if (p.startsWith('/services/collector')) return [200, JSON.stringify({ text: 'Success', code: 0 })];
  return [200, ''];
}

before(async () => {
  receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const p = (req.url ?? '').split('?')[0];
      const [status, body] = answer(req, p);
      res.statusCode = status;
      res.end(body);
      inbox(`${req.method} ${p}`).push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() });
    });
  });
  syslogTcp = net.createServer((socket) => socket.on('data', (c: Buffer) => tcpData.push({ method: 'tcp', url: '', headers: {}, body: c.toString() })));
  syslogUdp = dgram.createSocket('udp4');
  syslogUdp.on('message', (m) => udpData.push({ method: 'udp', url: '', headers: {}, body: m.toString() }));
  await Promise.all([
    new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve)),
    new Promise<void>((resolve) => syslogTcp.listen(0, '127.0.0.1', resolve)),
    new Promise<void>((resolve) => syslogUdp.bind(0, '127.0.0.1', resolve)),
  ]);
  [gw, origin] = await Promise.all([startGateway(), startOrigin()]);
});

after(async () => {
  receiver.closeAllConnections();
  await gw.stop();
  await Promise.all([origin.close(), new Promise((r) => receiver.close(r)), new Promise((r) => syslogTcp.close(r)), new Promise((r) => syslogUdp.close(() => r(undefined)))]);
});

const base = () => `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
const routeWith = (uri: string, plugins: Record<string, unknown>) => ({ uri, plugins, upstream: { type: 'roundrobin', nodes: { [origin.node]: 1 } } });
const errorLog = () => fs.readFileSync(path.join(gw.prefix, 'logs/error.log'), 'utf8');
const refused = async (plugin: string, conf: unknown) => {
  const r = await gw.admin('PUT', '/gateway/admin/routes/bad', routeWith('/bad', { [plugin]: conf }));
  assert.equal(r.status, 400);
  return (r.json as { error_msg: string }).error_msg;
};

describe('loki-logger', () => {
  it('pushes streams grouped by the resolved labels, with X-Scope-OrgID and the conf\'s headers', async () => {
    await put(gw, 'routes/l1', routeWith('/l1', { 'loki-logger': {
      endpoint_addrs: [base()], tenant_id: 'team-a', headers: { 'X-Extra': 'yes', 'X-Scope-OrgID': 'overridden' },
      log_labels: { job: 'gatehouse', who: '$arg_who' }, batch_max_size: 3, inactive_timeout: 1,
    } }));
    const r = await untilRouted(gw, '/l1?who=ann', (x) => x.status === 200);
    assert.equal(r.status, 200);
    await proxy(gw, '/l1?who=bob');
    await proxy(gw, '/l1?who=ann&n=2');
    const [got] = await inbox('POST /loki/api/v1/push').until(1);
    assert.equal(got.headers['content-type'], 'application/json');
    assert.equal(got.headers['x-scope-orgid'], 'team-a');
    assert.equal(got.headers['x-extra'], 'yes');
    const push = JSON.parse(got.body) as { streams: Array<{ stream: Record<string, string>; values: string[][] }> };
    assert.deepEqual(push.streams.map((s) => s.stream), [{ job: 'gatehouse', who: 'ann' }, { job: 'gatehouse', who: 'bob' }]);
    assert.deepEqual(push.streams.map((s) => s.values.length), [2, 1]);
    const [time, line] = push.streams[0].values[1];
    assert.match(time, /^\d{13}000000$/);
    const e = JSON.parse(line) as Entry;
    assert.equal(Number(time.slice(0, 13)), e.start_time);
    assert.equal(e.request.uri, '/l1?who=ann&n=2');
    assert.equal(e.route_id, 'l1');
    assert.equal(e.loki_labels, undefined);
    assert.equal(e.loki_log_time, undefined);
  });

  it('a 5xx from Loki is a failure the processor retries, logged with its status', async () => {
    failFirst.set('/loki/retry', [500]);
    await put(gw, 'routes/l2', routeWith('/l2', { 'loki-logger': { endpoint_addrs: [base()], endpoint_uri: '/loki/retry', batch_max_size: 1, max_retry_count: 1, retry_delay: 0 } }));
    await untilRouted(gw, '/l2', (x) => x.status === 200);
    const [first, second] = await inbox('POST /loki/retry').until(2);
    assert.equal(first.body, second.body);
    const push = JSON.parse(second.body) as { streams: Array<{ stream: Record<string, string> }> };
    assert.deepEqual(push.streams[0].stream, { job: 'apisix' });
    assert.equal(second.headers['x-scope-orgid'], 'fake');
    assert.match(errorLog(), /Batch Processor\[loki logger\] failed to process entries: loki server returned status: 500, body: not now/);
  });

  it('the Admin API refuses bad confs', async () => {
    assert.equal(await refused('loki-logger', {}), 'failed to check the configuration of plugin loki-logger err: property "endpoint_addrs" is required');
    assert.equal(await refused('loki-logger', { endpoint_addrs: [] }), 'failed to check the configuration of plugin loki-logger err: property "endpoint_addrs" validation failed: expect array to have at least 1 items');
    assert.equal(await refused('loki-logger', { endpoint_addrs: [base()], tenant_id: 1 }), 'failed to check the configuration of plugin loki-logger err: property "tenant_id" validation failed: wrong type: expected string, got number');
    assert.equal(await refused('loki-logger', { endpoint_addrs: [base()], timeout: 60001 }), 'failed to check the configuration of plugin loki-logger err: property "timeout" validation failed: expected 60001 to be at most 60000');
  });
});

describe('elasticsearch-logger', () => {
  it('asks the version first, then POSTs _bulk NDJSON: an index action line and the entry per request', async () => {
    await put(gw, 'routes/e1', routeWith('/e1', { 'elasticsearch-logger': {
      endpoint_addr: `${base()}/es8`, field: { index: 'gh-$arg_svc-{%Y}' }, auth: { username: 'elastic', password: 's3cret' },
      headers: { 'X-Tenant': 't1' }, batch_max_size: 2, inactive_timeout: 1, ssl_verify: false,
    } }));
    await untilRouted(gw, '/e1?svc=a', (x) => x.status === 200);
    await proxy(gw, '/e1?svc=b');
    const [version] = await inbox('GET /es8').until(1);
    const basic = `Basic ${Buffer.from('elastic:s3cret').toString('base64')}`;
    assert.equal(version.headers.authorization, basic);
    assert.equal(version.headers['x-tenant'], 't1');
    const [bulk] = await inbox('POST /es8/_bulk').until(1);
    assert.equal(bulk.headers['content-type'], 'application/x-ndjson');
    assert.equal(bulk.headers.accept, 'application/vnd.elasticsearch+json');
    assert.equal(bulk.headers.authorization, basic);
    assert.equal(bulk.headers['x-tenant'], 't1');
    assert.ok(bulk.body.endsWith('\n'));
    const lines = bulk.body.slice(0, -1).split('\n').map((l) => JSON.parse(l) as Entry);
    const year = new Date().getFullYear();
    assert.deepEqual([lines[0], lines[2]], [{ index: { _index: `gh-a-${year}` } }, { index: { _index: `gh-b-${year}` } }]);
    assert.deepEqual([lines[1].request.uri, lines[3].request.uri], ['/e1?svc=a', '/e1?svc=b']);
    assert.equal(lines[1].route_id, 'e1');
    assert.equal(inbox('GET /es8').items.length, 1, 'the version is asked once');
    assert.doesNotMatch(errorLog(), /s3cret/);
  });

  it('an ES 6 gets _type _doc in the action line', async () => {
    await put(gw, 'routes/e2', routeWith('/e2', { 'elasticsearch-logger': { endpoint_addrs: [`${base()}/es6`], field: { index: 'six' }, batch_max_size: 1 } }));
    await untilRouted(gw, '/e2', (x) => x.status === 200);
    const [bulk] = await inbox('POST /es6/_bulk').until(1);
    const [action, doc] = bulk.body.trimEnd().split('\n').map((l) => JSON.parse(l) as Entry);
    assert.deepEqual(action, { index: { _index: 'six', _type: '_doc' } });
    assert.equal(doc.route_id, 'e2');
    assert.equal(bulk.headers.authorization, undefined);
  });

  it('the Admin API refuses bad confs', async () => {
    const none = 'failed to check the configuration of plugin elasticsearch-logger err: value should match only one schema, but matches none';
    assert.equal(await refused('elasticsearch-logger', { field: { index: 'x' } }), none);
    assert.equal(await refused('elasticsearch-logger', { endpoint_addr: base() }), none);
    assert.equal(await refused('elasticsearch-logger', { endpoint_addr: `${base()}/`, field: { index: 'x' } }),
      `failed to check the configuration of plugin elasticsearch-logger err: property "endpoint_addr" validation failed: failed to match pattern "[^/]$" with "${base()}/"`);
    assert.equal(await refused('elasticsearch-logger', { endpoint_addr: base(), field: {} }),
      'failed to check the configuration of plugin elasticsearch-logger err: property "field" validation failed: property "index" is required');
  });
});

describe('clickhouse-logger', () => {
  it('POSTs INSERT INTO <logtable> FORMAT JSONEachRow and the rows, with the X-ClickHouse-* headers', async () => {
    await put(gw, 'routes/c1', routeWith('/c1', { 'clickhouse-logger': {
      endpoint_addr: `${base()}/ch?x=1`, user: 'default', password: 'pw', database: 'logs', logtable: 'access', batch_max_size: 2, inactive_timeout: 1,
    } }));
    await untilRouted(gw, '/c1?n=1', (x) => x.status === 200);
    await proxy(gw, '/c1?n=2');
    const [got] = await inbox('POST /ch').until(1);
    assert.equal(got.url, '/ch?x=1');
    assert.equal(got.headers.host, '127.0.0.1');
    assert.equal(got.headers['content-type'], 'application/json');
    assert.equal(got.headers['x-clickhouse-user'], 'default');
    assert.equal(got.headers['x-clickhouse-key'], 'pw');
    assert.equal(got.headers['x-clickhouse-database'], 'logs');
    const prefix = 'INSERT INTO access FORMAT JSONEachRow ';
    assert.ok(got.body.startsWith(prefix), got.body.slice(0, 60));
    // two rows, one space between them
    const rows = got.body.slice(prefix.length).replace(/\} \{/, '}\n{').split('\n').map((l) => JSON.parse(l) as Entry);
    assert.deepEqual(rows.map((e) => e.request.uri), ['/c1?n=1', '/c1?n=2']);
  });

  it('a batch of one is one row; a 4xx fails it, logged with host and port', async () => {
    failFirst.set('/ch1', [401]);
    await put(gw, 'routes/c2', routeWith('/c2', { 'clickhouse-logger': {
      endpoint_addrs: [`${base()}/ch1`], user: 'u', password: 'hidden-pw', database: 'd', logtable: 't', batch_max_size: 1, max_retry_count: 1, retry_delay: 0,
    } }));
    await untilRouted(gw, '/c2', (x) => x.status === 200);
    const [, got] = await inbox('POST /ch1').until(2);
    const row = JSON.parse(got.body.slice('INSERT INTO t FORMAT JSONEachRow '.length)) as Entry;
    assert.equal(row.route_id, 'c2');
    assert.match(errorLog(), /Batch Processor\[clickhouse-logger\] failed to process entries: server returned status code\[401\] host\[127\.0\.0\.1\] port\[\d+\] body\[not now\]/);
    assert.doesNotMatch(errorLog(), /hidden-pw/);
  });

  it('the Admin API refuses a conf without its required fields', async () => {
    assert.equal(await refused('clickhouse-logger', { endpoint_addr: base(), user: 'u', password: 'p', database: 'd' }),
      'failed to check the configuration of plugin clickhouse-logger err: value should match only one schema, but matches none');
  });
});

describe('splunk-hec-logging', () => {
  it('POSTs HEC events back to back with Authorization: Splunk <token> and the channel', async () => {
    await put(gw, 'routes/s1', routeWith('/s1', { 'splunk-hec-logging': {
      endpoint: { uri: `${base()}/services/collector`, token: 'tok-123', channel: 'chan-1' }, ssl_verify: false,
      log_format_extra: { who: '$arg_who', latency: 'not over' }, batch_max_size: 2, inactive_timeout: 1,
    } }));
    await untilRouted(gw, '/s1?who=ann', (x) => x.status === 200, { headers: { 'X-Test': 't' } });
    await proxy(gw, '/s1?who=bob', { method: 'POST', body: 'x' });
    const [got] = await inbox('POST /services/collector').until(1);
    assert.equal(got.headers.authorization, 'Splunk tok-123');
    assert.equal(got.headers['x-splunk-request-channel'], 'chan-1');
    assert.equal(got.headers['content-type'], 'application/json');
    const events = got.body.replace(/\}\{"time"/, '}\n{"time"').split('\n').map((l) => JSON.parse(l) as Entry);
    assert.equal(events.length, 2);
    const [a, b] = events;
    assert.equal(a.source, 'apache-apisix-splunk-hec-logging');
    assert.equal(a.sourcetype, '_json');
    assert.equal(typeof a.host, 'string');
    assert.ok(Math.abs(a.time - Date.now() / 1000) < 60);
    assert.equal(a.event.request_method, 'GET');
    assert.equal(a.event.request_url, `http://127.0.0.1:${gw.proxyPort}/s1?who=ann`);
    assert.deepEqual(a.event.request_query, { who: 'ann' });
    assert.equal(a.event.request_headers['x-test'], 't');
    assert.equal(a.event.response_status, 200);
    assert.equal(a.event.upstream, origin.node);
    assert.equal(typeof a.event.latency, 'number');
    assert.equal(a.event.who, 'ann');
    assert.equal(b.event.request_method, 'POST');
    assert.equal(b.event.who, 'bob');
    assert.equal(a.event.route_id, undefined);
  });

  it('with a log_format the event is the formatted entry; a refusal is logged with Splunk\'s text, never the token', async () => {
    failFirst.set('/services/collector/f', [403]);
    await put(gw, 'routes/s2', routeWith('/s2', { 'splunk-hec-logging': {
      endpoint: { uri: `${base()}/services/collector/f`, token: 'secret-token' }, log_format: { uri: '$uri', ip: '$remote_addr' },
      batch_max_size: 1, max_retry_count: 1, retry_delay: 0,
    } }));
    await untilRouted(gw, '/s2', (x) => x.status === 200);
    const [, got] = await inbox('POST /services/collector/f').until(2);
    const e = JSON.parse(got.body) as Entry;
    assert.deepEqual(e.event, { uri: '/s2', ip: '127.0.0.1', route_id: 's2' });
    assert.equal(got.headers['x-splunk-request-channel'], undefined);
    assert.match(errorLog(), /Batch Processor\[splunk-hec-logging\] failed to process entries: failed to send splunk, Invalid token/);
    assert.doesNotMatch(errorLog(), /secret-token/);
  });

  it('the Admin API refuses a conf without endpoint, or an endpoint without token', async () => {
    assert.equal(await refused('splunk-hec-logging', {}), 'failed to check the configuration of plugin splunk-hec-logging err: property "endpoint" is required');
    assert.equal(await refused('splunk-hec-logging', { endpoint: { uri: base() } }),
      'failed to check the configuration of plugin splunk-hec-logging err: property "endpoint" validation failed: property "token" is required');
  });
});

describe('syslog', () => {
  const line = /^<46>1 (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (\S+) apisix (\d+) - - (\{.*\})$/;

  it('sends RFC 5424 lines over TCP: <46>1, the time, the request\'s host, apisix, the pid, the entry\'s JSON', async () => {
    await put(gw, 'routes/y1', routeWith('/y1', { syslog: { host: '127.0.0.1', port: (syslogTcp.address() as AddressInfo).port, flush_limit: 1, batch_max_size: 1 } }));
    await untilRouted(gw, '/y1?n=1', (x) => x.status === 200, { headers: { host: 'example.test' } });
    const [got] = await tcpData.until(1);
    assert.ok(got.body.endsWith('\n'));
    const m = line.exec(got.body.slice(0, -1));
    assert.ok(m, got.body);
    assert.ok(Math.abs(Date.parse(m[1]) - Date.now()) < 60_000);
    assert.equal(m[2], 'example.test');
    assert.ok(Number(m[3]) > 0);
    const e = JSON.parse(m[4]) as Entry;
    assert.equal(e.route_id, 'y1');
    assert.equal(e.request.uri, '/y1?n=1');
  });

  it('over UDP the socket logger holds lines below flush_limit and sends them in one datagram once past it', async () => {
    await put(gw, 'routes/y2', routeWith('/y2', { syslog: {
      host: '127.0.0.1', port: (syslogUdp.address() as AddressInfo).port, sock_type: 'udp', flush_limit: 1200, batch_max_size: 1,
      log_format: { uri: '$request_uri', pad: 'x'.repeat(400) },
    } }));
    // each line is some 500 bytes: the third passes 1200 and all three go together
    await untilRouted(gw, '/y2?n=1', (x) => x.status === 200);
    await proxy(gw, '/y2?n=2');
    assert.equal(udpData.items.length, 0);
    await proxy(gw, '/y2?n=3');
    const [got] = await udpData.until(1);
    const lines = got.body.split('\n').filter((l) => l !== '');
    assert.deepEqual(lines.map((l) => (JSON.parse(line.exec(l)![4]) as Entry).uri).sort(), ['/y2?n=1', '/y2?n=2', '/y2?n=3']);
  });

  it('the Admin API refuses bad confs', async () => {
    assert.equal(await refused('syslog', { host: '127.0.0.1' }), 'failed to check the configuration of plugin syslog err: property "port" is required');
    assert.equal(await refused('syslog', { host: '127.0.0.1', port: 514, sock_type: 'unix' }),
      'failed to check the configuration of plugin syslog err: property "sock_type" validation failed: matches none of the enum values');
    assert.equal(await refused('syslog', { host: '127.0.0.1', port: 514, pool_size: 4 }),
      'failed to check the configuration of plugin syslog err: property "pool_size" validation failed: expected 4 to be at least 5');
  });
});

describe('the new loggers in the Admin API', () => {
  it('are listed by priority, with their batch processor names and encrypt_fields', async () => {
    const names = (await gw.admin('GET', '/gateway/admin/plugins/list')).json as string[];
    const order = ['loki-logger', 'elasticsearch-logger', 'http-logger', 'splunk-hec-logging', 'syslog', 'clickhouse-logger'].map((n) => names.indexOf(n));
    assert.ok(order.every((i) => i >= 0), String(order));
    assert.deepEqual(order, [...order].sort((a, b) => a - b));
    for (const [name, label] of [['loki-logger', 'loki logger'], ['elasticsearch-logger', 'elasticsearch-logger'], ['clickhouse-logger', 'clickhouse-logger'], ['splunk-hec-logging', 'splunk-hec-logging'], ['syslog', 'sys logger']]) {
      const schema = (await gw.admin('GET', `/gateway/admin/plugins/${name}`)).json as { properties: { name: { default: string } } };
      assert.equal(schema.properties.name.default, label, name);
    }
  });
});
