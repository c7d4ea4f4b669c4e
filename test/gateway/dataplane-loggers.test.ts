/**
 * The logger plugins send their entries: http-logger to a loopback HTTP
 * receiver, tcp-logger to a net server, udp-logger to a dgram socket,
 * file-logger to a temporary file, each after real requests through the
 * gateway (what t/plugin/http-logger*.t, tcp-logger.t, udp-logger.t and
 * file-logger*.t check, restated in our own cases). Every wait is for the
 * receiver getting data, never for a fixed time.
 */
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import tls from 'node:tls';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';
import { CertFactory } from '../tls/certs.ts';
import { Inbox } from './inbox.ts';

interface Posted { url: string; headers: http.IncomingHttpHeaders; body: string }

type Entry = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let gw: Gateway;
let origin: Origin;
let httpServer: http.Server;
let tcpServer: net.Server;
let udpSocket: dgram.Socket;
const posted = new Map<string, Inbox<Posted>>();
const tcpGot = new Inbox<string>();
const udpGot = new Inbox<string>();
/** Statuses the HTTP receiver answers with, per path, before it answers 200. */
const failFirst = new Map<string, number[]>();
let dir: string;
/** Answers of the receiver's `/held` path, kept until the test lets them go. */
const held: Array<() => void> = [];

const inbox = (p: string) => {
  let b = posted.get(p);
  if (!b) posted.set(p, (b = new Inbox()));
  return b;
};
const port = (s: { address(): AddressInfo | string | null }) => (s.address() as AddressInfo).port;

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-loggers-'));
  httpServer = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const p = (req.url ?? '').split('?')[0];
      if (p === '/held') {
        held.push(() => res.end('ok'));
        inbox(p).push({ url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() });
        return;
      }
      res.statusCode = failFirst.get(p)?.shift() ?? 200;
      res.end(res.statusCode === 200 ? 'ok' : 'try again');
      inbox(p).push({ url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() });
    });
  });
  tcpServer = net.createServer((socket) => {
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('end', () => tcpGot.push(Buffer.concat(chunks).toString()));
  });
  udpSocket = dgram.createSocket('udp4');
  udpSocket.on('message', (m) => udpGot.push(m.toString()));
  await Promise.all([
    new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve)),
    new Promise<void>((resolve) => tcpServer.listen(0, '127.0.0.1', resolve)),
    new Promise<void>((resolve) => udpSocket.bind(0, '127.0.0.1', resolve)),
  ]);
  [gw, origin] = await Promise.all([startGateway(), startOrigin()]);
});

after(async () => {
  httpServer.closeAllConnections();
  await Promise.all([gw.stop(), origin.close(), new Promise((r) => httpServer.close(r)), new Promise((r) => tcpServer.close(r)), new Promise((r) => udpSocket.close(() => r(undefined)))]);
  fs.rmSync(dir, { recursive: true, force: true });
});

const routeWith = (uri: string, plugins: Record<string, unknown>) => ({ uri, plugins, upstream: { type: 'roundrobin', nodes: { [origin.node]: 1 } } });
const httpUri = (p: string) => `http://127.0.0.1:${port(httpServer)}${p}`;
const errorLog = () => fs.readFileSync(path.join(gw.prefix, 'logs/error.log'), 'utf8');

describe('http-logger', () => {
  it('POSTs the full entry of a request (a batch of one is an object)', async () => {
    await put(gw, 'routes/h1', routeWith('/h1', { 'http-logger': { uri: httpUri('/one?k=v'), batch_max_size: 1, auth_header: 'Basic abc' } }));
    const r = await untilRouted(gw, '/h1?x=1&y', (x) => x.status === 200, { headers: { 'X-Test': 'a' } });
    assert.equal(r.status, 200);
    const [got] = await inbox('/one').until(1);
    assert.equal(got.url, '/one?k=v');
    assert.equal(got.headers['content-type'], 'application/json');
    assert.equal(got.headers.authorization, 'Basic abc');
    assert.equal(got.headers.host, '127.0.0.1');
    const e = JSON.parse(got.body) as Entry;
    assert.equal(e.route_id, 'h1');
    assert.equal(e.service_id, '');
    assert.equal(e.client_ip, '127.0.0.1');
    assert.equal(e.upstream, origin.node);
    assert.equal(e.request.method, 'GET');
    assert.equal(e.request.uri, '/h1?x=1&y');
    assert.equal(e.request.url, `http://127.0.0.1:${gw.proxyPort}/h1?x=1&y`);
    assert.deepEqual(e.request.querystring, { x: '1', y: true });
    assert.equal(e.request.headers['x-test'], 'a');
    assert.equal(typeof e.request.size, 'number');
    assert.equal(e.response.status, 200);
    assert.equal(e.response.headers['content-type'], 'application/json');
    assert.match(String(e.response.headers.server), /^APISIX/);
    assert.equal(typeof e.response.size, 'number');
    for (const k of ['latency', 'apisix_latency', 'upstream_latency', 'start_time']) assert.equal(typeof e[k], 'number', k);
    assert.ok(e.latency >= 0 && e.start_time > Date.now() - 60_000);
    assert.equal(typeof e.server.hostname, 'string');
    assert.equal(typeof e.server.version, 'string');
    assert.equal(e.request.body, undefined);
  });

  it('batch_max_size 2: two requests make one POST of a two-entry array', async () => {
    await put(gw, 'routes/h2', routeWith('/h2', { 'http-logger': { uri: httpUri('/two'), batch_max_size: 2, inactive_timeout: 1 } }));
    await untilRouted(gw, '/h2?n=1', (x) => x.status === 200);
    await proxy(gw, '/h2?n=2');
    const [got] = await inbox('/two').until(1);
    const entries = JSON.parse(got.body) as Entry[];
    assert.ok(Array.isArray(entries));
    assert.deepEqual(entries.map((e) => e.request.uri), ['/h2?n=1', '/h2?n=2']);
  });

  it('a batch not full goes after inactive_timeout; new_line puts one JSON document a line', async () => {
    await put(gw, 'routes/h3', routeWith('/h3', { 'http-logger': { uri: httpUri('/lines'), batch_max_size: 10, inactive_timeout: 1, concat_method: 'new_line' } }));
    await untilRouted(gw, '/h3?n=1', (x) => x.status === 200);
    await proxy(gw, '/h3?n=2', { method: 'POST', body: 'hi' });
    const [got] = await inbox('/lines').until(1);
    assert.equal(got.headers['content-type'], 'text/plain');
    const lines = got.body.split('\n').map((l) => JSON.parse(l) as Entry);
    assert.deepEqual(lines.map((e) => [e.request.method, e.request.uri]), [['GET', '/h3?n=1'], ['POST', '/h3?n=2']]);
  });

  it('a batch the receiver answers 500 is sent again (max_retry_count), and the error log says why', async () => {
    failFirst.set('/retry', [500]);
    await put(gw, 'routes/h4', routeWith('/h4', { 'http-logger': { uri: httpUri('/retry'), batch_max_size: 1, max_retry_count: 2, retry_delay: 0 } }));
    await untilRouted(gw, '/h4', (x) => x.status === 200);
    const [first, second] = await inbox('/retry').until(2);
    assert.equal(first.body, second.body);
    assert.equal((JSON.parse(second.body) as Entry).route_id, 'h4');
    assert.match(errorLog(), /Batch Processor\[http logger\] failed to process entries: server returned status code\[500\] host\[127\.0\.0\.1\] port\[\d+\] body\[try again\]/);
    assert.equal(failFirst.get('/retry')?.length, 0);
  });

  it('include_req_body and include_resp_body add the bodies', async () => {
    await put(gw, 'routes/h5', routeWith('/h5', { 'http-logger': { uri: httpUri('/bodies'), batch_max_size: 1, include_req_body: true, include_resp_body: true, max_req_body_bytes: 5 } }));
    await untilRouted(gw, '/h5', (x) => x.status === 200, { method: 'POST', headers: { 'content-type': 'text/plain' } });
    const r = await proxy(gw, '/h5', { method: 'POST', body: 'the request body' });
    const [, got] = await inbox('/bodies').until(2);
    const e = JSON.parse(got.body) as Entry;
    assert.equal(e.request.body, 'the r');
    assert.equal(e.response.body, r.body);
    assert.equal((JSON.parse(e.response.body) as { body: string }).body, 'the request body');
  });

  it('log_format_extra adds keys, never over the full entry\'s; include_req_body_expr decides on the body', async () => {
    await put(gw, 'routes/h6', routeWith('/h6', { 'http-logger': {
      uri: httpUri('/extra'), batch_max_size: 1, include_req_body: true, include_req_body_expr: [['arg_body', '==', 'yes']],
      log_format_extra: { agent: '$http_user_agent', route_id: 'not over', fixed: 1 },
    } }));
    await untilRouted(gw, '/h6?body=no', (x) => x.status === 200, { method: 'POST', headers: { 'user-agent': 'tester' } });
    await proxy(gw, '/h6?body=yes', { method: 'POST', body: 'kept' });
    const [a, b] = (await inbox('/extra').until(2)).map((p) => JSON.parse(p.body) as Entry);
    assert.equal(a.agent, 'tester');
    assert.equal(a.fixed, 1);
    assert.equal(a.route_id, 'h6');
    assert.equal(a.request.body, undefined);
    assert.equal(b.request.body, 'kept');
  });

  it('beyond the metadata\'s max_pending_entries new entries are discarded, and the error log says so', async () => {
    await put(gw, 'plugin_metadata/http-logger', { max_pending_entries: 1 });
    await put(gw, 'routes/h7', routeWith('/h7', { 'http-logger': { uri: httpUri('/held'), batch_max_size: 1, timeout: 30 } }));
    await untilRouted(gw, '/h7?n=1', (x) => x.status === 200);
    await inbox('/held').until(1);
    // the first entry's POST is held: the next request's entry is over the bound
    await untilRouted(gw, '/h7?n=2', () => /max pending entries limit exceeded\. discarding entry\..* max_pending_entries: 1 /.test(errorLog()));
    for (const release of held.splice(0)) release();
    await gw.admin('DELETE', '/gateway/admin/plugin_metadata/http-logger');
    assert.deepEqual(inbox('/held').items.map((p) => (JSON.parse(p.body) as Entry).request.uri), ['/h7?n=1']);
  });
});

describe('tcp-logger and udp-logger', () => {
  it('tcp-logger writes one JSON document per connection', async () => {
    await put(gw, 'routes/t1', routeWith('/t1', { 'tcp-logger': { host: '127.0.0.1', port: port(tcpServer), batch_max_size: 2, inactive_timeout: 1 } }));
    await untilRouted(gw, '/t1?a=1', (x) => x.status === 200);
    await proxy(gw, '/t1?a=2', { method: 'PUT', body: 'x' });
    const [got] = await tcpGot.until(1);
    const entries = JSON.parse(got) as Entry[];
    assert.deepEqual(entries.map((e) => [e.route_id, e.request.method, e.request.querystring.a]), [['t1', 'GET', '1'], ['t1', 'PUT', '2']]);
  });

  it('udp-logger sends one datagram a batch, in the plugin metadata\'s log_format', async () => {
    await put(gw, 'plugin_metadata/udp-logger', { log_format: { host: '$host', client: '$remote_addr', nested: { method: '$request_method', fixed: 'yes' }, none: '$arg_nothing' } });
    await put(gw, 'routes/u1', routeWith('/u1', { 'udp-logger': { host: '127.0.0.1', port: port(udpSocket), batch_max_size: 1 } }));
    await untilRouted(gw, '/u1', (x) => x.status === 200);
    const [got] = await udpGot.until(1);
    assert.deepEqual(JSON.parse(got), { host: '127.0.0.1', client: '127.0.0.1', nested: { method: 'GET', fixed: 'yes' }, route_id: 'u1' });
  });
});

describe('over TLS', () => {
  let certs: CertFactory;
  let tlsServer: tls.Server;
  let httpsServer: https.Server;
  const tlsGot = new Inbox<{ servername: string | false | null; data: string }>();
  const httpsGot = new Inbox<string>();

  before(async () => {
    certs = new CertFactory(path.join(dir, 'certs'));
    certs.selfSigned('logs.test');
    const pair = { cert: certs.read('logs.test.crt'), key: certs.read('logs.test.key') };
    tlsServer = tls.createServer(pair, (socket) => {
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('end', () => { tlsGot.push({ servername: socket.servername, data: Buffer.concat(chunks).toString() }); socket.end(); });
    });
    httpsServer = https.createServer(pair, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => { res.end('ok'); httpsGot.push(Buffer.concat(chunks).toString()); });
    });
    await Promise.all([
      new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve)),
      new Promise<void>((resolve) => httpsServer.listen(0, '127.0.0.1', resolve)),
    ]);
  });
  after(async () => {
    httpsServer.closeAllConnections();
    await Promise.all([new Promise((r) => tlsServer.close(r)), new Promise((r) => httpsServer.close(r))]);
  });

  it('tcp-logger with tls (tls_options as the SNI) and http-logger to an https uri (ssl_verify off)', async () => {
    await put(gw, 'routes/s1', routeWith('/s1', {
      'tcp-logger': { host: '127.0.0.1', port: port(tlsServer), tls: true, tls_options: 'logs.test', batch_max_size: 1 },
      'http-logger': { uri: `https://127.0.0.1:${port(httpsServer)}/tls`, batch_max_size: 1 },
    }));
    await untilRouted(gw, '/s1', (x) => x.status === 200);
    const [[overTls], [overHttps]] = await Promise.all([tlsGot.until(1), httpsGot.until(1)]);
    assert.equal(overTls.servername, 'logs.test');
    assert.equal((JSON.parse(overTls.data) as Entry).route_id, 's1');
    assert.equal((JSON.parse(overHttps) as Entry).route_id, 's1');
  });
});

describe('file-logger', () => {
  /** Lines of `file`, once there are `n`. */
  async function linesOf(file: string, n: number): Promise<Entry[]> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
      const lines = text.split('\n').filter((l) => l !== '');
      if (lines.length >= n) return lines.map((l) => JSON.parse(l) as Entry);
      if (Date.now() > deadline) throw new Error(`${file}: ${lines.length} of ${n} lines`);
      // the log phase runs after the answer: poll the file until the line is in
      await sleep(10);
    }
  }

  it('appends one JSON line per request, in the conf\'s log_format, where match holds', async () => {
    const file = path.join(dir, 'access.json');
    await put(gw, 'routes/f1', routeWith('/f1', { 'file-logger': { path: file, log_format: { uri: '$uri', status: '$status' }, match: [[['arg_skip', '~=', 'yes']]] } }));
    await untilRouted(gw, '/f1?n=1', (x) => x.status === 200);
    await proxy(gw, '/f1?skip=yes');
    await proxy(gw, '/f1?n=3');
    const lines = await linesOf(file, 2);
    assert.deepEqual(lines, [{ uri: '/f1', status: '200', route_id: 'f1' }, { uri: '/f1', status: '200', route_id: 'f1' }]);
  });

  it('is reopened on USR1: after a rename the lines go to a new file of the same path', async () => {
    const file = path.join(dir, 'rotated.json');
    await put(gw, 'routes/f3', routeWith('/f3', { 'file-logger': { path: file, log_format: { uri: '$request_uri' } } }));
    await untilRouted(gw, '/f3?before', (x) => x.status === 200);
    await linesOf(file, 1);
    fs.renameSync(file, `${file}.1`);
    gw.child.kill('SIGUSR1');
    // until the worker reopened: requests before that still go to the renamed file
    await untilRouted(gw, '/f3?after', () => fs.existsSync(file) && fs.readFileSync(file, 'utf8') !== '');
    const [first] = await linesOf(file, 1);
    assert.equal(first.uri, '/f3?after');
    const old = await linesOf(`${file}.1`, 1);
    assert.equal(old[0].uri, '/f3?before');
  });

  it('takes its path from the plugin metadata; the Admin API refuses a conf with neither', async () => {
    const refused = await gw.admin('PUT', '/gateway/admin/routes/f2', routeWith('/f2', { 'file-logger': {} }));
    assert.equal(refused.status, 400);
    assert.deepEqual(refused.json, { error_msg: 'failed to check the configuration of plugin file-logger err: property "path" is not set in either the plugin conf or the metadata' });
    const file = path.join(dir, 'from-metadata.json');
    await put(gw, 'plugin_metadata/file-logger', { path: file });
    await put(gw, 'routes/f2', routeWith('/f2', { 'file-logger': { include_resp_body: true } }));
    const r = await untilRouted(gw, '/f2', (x) => x.status === 200);
    const [e] = await linesOf(file, 1);
    assert.equal(e.route_id, 'f2');
    assert.equal(e.response.body, r.body);
  });
});

describe('the loggers in the Admin API', () => {
  it('are listed by APISIX\'s priorities, with the batch processor\'s name defaults', async () => {
    const names = (await gw.admin('GET', '/gateway/admin/plugins/list')).json as string[];
    const order = ['http-logger', 'tcp-logger', 'udp-logger', 'file-logger'].map((n) => names.indexOf(n));
    assert.ok(order.every((i) => i >= 0), String(order));
    assert.deepEqual(order, [...order].sort((a, b) => a - b));
    for (const [name, label] of [['http-logger', 'http logger'], ['tcp-logger', 'tcp logger'], ['udp-logger', 'udp logger']]) {
      const schema = (await gw.admin('GET', `/gateway/admin/plugins/${name}`)).json as { properties: { name: { default: string } } };
      assert.equal(schema.properties.name.default, label, name);
    }
    // the loggers' metadata schema bounds the backlog
    const meta = await gw.admin('PUT', '/gateway/admin/plugin_metadata/tcp-logger', { max_pending_entries: 0 });
    assert.equal(meta.status, 400);
  });
});
