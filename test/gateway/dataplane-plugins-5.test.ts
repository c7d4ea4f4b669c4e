/**
 * forward-auth (and the plugins after it) on the gateway's request path:
 * a loopback auth service that decides by the headers it is sent, an echo
 * origin, what the client and the origin see; and the Admin API's
 * refusals with APISIX's messages.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import zlib from 'node:zlib';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { assertRefused, proxy, put, routeTo, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin, Seen } from './dataplane-kit.ts';
import { TestCa } from './tls-kit.ts';

let gw: Gateway;
let o: Origin;
let auth: http.Server;
let authUri: string;
/** What the auth service was sent, newest last. */
const asked: Seen[] = [];

/** The auth service: `x-pass: yes` passes with a user header; else 401 with a challenge and a body of its own. */
function authService(req: http.IncomingMessage, res: http.ServerResponse, body: string): void {
  asked.push({ port: 0, method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
  if (req.url?.startsWith('/slow')) return; // never answers: the timeout's case
  if (req.headers['x-pass'] === 'yes' || body === 'let me in') {
    res.setHeader('X-User-Id', 'u-42');
    res.setHeader('X-Role', ['reader', 'writer']);
    res.end('ok');
    return;
  }
  res.statusCode = 401;
  res.setHeader('WWW-Authenticate', 'Bearer realm="auth"');
  res.setHeader('X-Reason', 'no pass');
  res.end('go away\n');
}

before(async () => {
  auth = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => authService(req, res, Buffer.concat(chunks).toString()));
  });
  await new Promise<void>((resolve) => auth.listen(0, '127.0.0.1', resolve));
  authUri = `http://127.0.0.1:${(auth.address() as AddressInfo).port}`;
  [gw, o] = await Promise.all([startGateway(), startOrigin()]);
});
after(async () => {
  auth.closeAllConnections();
  await Promise.all([gw.stop(), o.close(), new Promise((resolve) => auth.close(resolve))]);
});

const route = (uri: string, plugins: Record<string, unknown>) => routeTo(o, uri, plugins);
const refused = (plugins: Record<string, unknown>, message: string) => assertRefused(gw, o, plugins, message);

describe('forward-auth', () => {
  it('refuses a conf without uri or with values out of range', async () => {
    const p = 'failed to check the configuration of plugin forward-auth err: ';
    await refused({ 'forward-auth': {} }, `${p}property "uri" is required`);
    await refused({ 'forward-auth': { uri: authUri, request_method: 'PUT' } }, `${p}property "request_method" validation failed: matches none of the enum values`);
    await refused({ 'forward-auth': { uri: authUri, timeout: 0 } }, `${p}property "timeout" validation failed: expected 0 to be at least 1`);
    await refused({ 'forward-auth': { uri: authUri, status_on_error: 600 } }, `${p}property "status_on_error" validation failed: expected 600 to be at most 599`);
    await refused({ 'forward-auth': { uri: authUri, extra_headers: {} } }, `${p}property "extra_headers" validation failed: expect object to have at least 1 properties`);
  });

  it('a pass goes upstream with the service headers listed; the service is told of the request', async () => {
    await put(gw, 'routes/fa', route('/fa', { 'forward-auth': {
      uri: `${authUri}/check?from=gw`, request_headers: ['X-Pass', 'Authorization'], upstream_headers: ['X-User-Id', 'X-Role', 'X-Absent'],
      extra_headers: { 'X-Route': 'route $uri', 'X-Arg': '$arg_a' },
    } }));
    const ok = await untilRouted(gw, '/fa?a=1', (x) => x.status === 200, { headers: { 'X-Pass': 'yes', 'X-Absent': 'forged', 'X-Other': 'kept' } });
    assert.equal(ok.echo?.headers['x-user-id'], 'u-42');
    assert.equal(ok.echo?.headers['x-role'], 'reader, writer');
    assert.equal(ok.echo?.headers['x-absent'], undefined, 'a listed header the service did not send is removed');
    assert.equal(ok.echo?.headers['x-other'], 'kept');
    const told = asked.at(-1)!;
    assert.equal(told.method, 'GET');
    assert.equal(told.url, '/check?from=gw');
    assert.equal(told.headers['x-forwarded-proto'], 'http');
    assert.equal(told.headers['x-forwarded-method'], 'GET');
    assert.equal(told.headers['x-forwarded-host'], '127.0.0.1');
    assert.equal(told.headers['x-forwarded-uri'], '/fa?a=1');
    assert.equal(told.headers['x-forwarded-for'], '127.0.0.1');
    assert.equal(told.headers['x-pass'], 'yes');
    assert.equal(told.headers['x-other'], undefined, 'only the listed request headers');
    assert.equal(told.headers.authorization, undefined, 'a listed header the client did not send is not sent');
    assert.equal(told.headers['x-route'], 'route /fa');
    assert.equal(told.headers['x-arg'], '1');
    assert.equal(told.headers.host, authUri.slice('http://'.length));
    assert.match(String(told.headers['user-agent']), /^lua-resty-http\//);
  });

  it('a refusal answers the service status and body with only the client_headers listed', async () => {
    await put(gw, 'routes/fa', route('/fa', { 'forward-auth': { uri: authUri, client_headers: ['WWW-Authenticate'] } }));
    const no = await untilRouted(gw, '/fa', (x) => x.status === 401 && x.headers['www-authenticate'] !== undefined);
    assert.equal(no.body, 'go away\n');
    assert.equal(no.headers['www-authenticate'], 'Bearer realm="auth"');
    assert.equal(no.headers['x-reason'], undefined);
    const before = o.seen.length;
    assert.equal((await proxy(gw, '/fa')).status, 401);
    assert.equal(o.seen.length, before, 'the origin is not asked');
  });

  it('POST sends the client body (and its Content-Encoding) to the service; the origin still gets it', async () => {
    await put(gw, 'routes/fa', route('/fa', { 'forward-auth': { uri: authUri, request_method: 'POST' } }));
    const opts = { method: 'POST', body: 'let me in', headers: { 'Content-Encoding': 'identity', 'X-Custom': 'no' } };
    const ok = await untilRouted(gw, '/fa', (x) => x.status === 200, opts);
    assert.equal(ok.echo?.body, 'let me in');
    const told = asked.at(-1)!;
    assert.equal(told.method, 'POST');
    assert.equal(told.body, 'let me in');
    assert.equal(told.headers['content-length'], '9');
    assert.equal(told.headers['content-encoding'], 'identity');
    assert.equal(told.headers['x-custom'], undefined);
    assert.equal((await proxy(gw, '/fa', { method: 'POST', body: 'no' })).status, 401);
    await put(gw, 'routes/fa', route('/fa', { 'forward-auth': { uri: authUri, request_method: 'POST', max_req_body_size: 4 } }));
    await untilRouted(gw, '/fa', (x) => x.status === 413, opts);
  });

  it('no answer from the service: status_on_error, or through with allow_degradation', async () => {
    // a port nothing listens on: a closed server's
    const gone = http.createServer();
    await new Promise<void>((resolve) => gone.listen(0, '127.0.0.1', resolve));
    const port = (gone.address() as AddressInfo).port;
    await new Promise((resolve) => gone.close(resolve));
    await put(gw, 'routes/fa', route('/fa', { 'forward-auth': { uri: `http://127.0.0.1:${port}/`, status_on_error: 503 } }));
    await untilRouted(gw, '/fa', (x) => x.status === 503);
    await put(gw, 'routes/fa', route('/fa', { 'forward-auth': { uri: `http://127.0.0.1:${port}/`, allow_degradation: true } }));
    const through = await untilRouted(gw, '/fa', (x) => x.status === 200);
    assert.equal(through.echo?.url, '/fa');
    await put(gw, 'routes/fa', route('/fa', { 'forward-auth': { uri: `${authUri}/slow`, timeout: 100, keepalive: false } }));
    await untilRouted(gw, '/fa', (x) => x.status === 403);
  });

  it('an https service: its certificate checked with ssl_verify (the default), not without', async () => {
    const pem = new TestCa().issue(['localhost']);
    const tls = https.createServer({ cert: pem.cert, key: pem.key }, (req, res) => authService(req, res, ''));
    await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
    try {
      const uri = `https://127.0.0.1:${(tls.address() as AddressInfo).port}/tls`;
      await put(gw, 'routes/fa', route('/fa', { 'forward-auth': { uri, status_on_error: 502 } }));
      await untilRouted(gw, '/fa', (x) => x.status === 502, { headers: { 'X-Pass': 'yes' } });
      await put(gw, 'routes/fa', route('/fa', { 'forward-auth': { uri, ssl_verify: false, request_headers: ['X-Pass'], upstream_headers: ['X-User-Id'] } }));
      const ok = await untilRouted(gw, '/fa', (x) => x.status === 200, { headers: { 'X-Pass': 'yes' } });
      assert.equal(ok.echo?.headers['x-user-id'], 'u-42');
      assert.equal(asked.at(-1)!.url, '/tls');
    } finally {
      tls.closeAllConnections();
      await new Promise((resolve) => tls.close(resolve));
    }
  });
});

describe('multi-auth', () => {
  const p = 'failed to check the configuration of plugin multi-auth err: ';

  it('refuses fewer than two plugins, unknown or non-auth ones, and sub-confs their plugin refuses', async () => {
    await refused({ 'multi-auth': {} }, `${p}property "auth_plugins" is required`);
    await refused({ 'multi-auth': { auth_plugins: [{ 'key-auth': {} }] } }, `${p}property "auth_plugins" validation failed: expect array to have at least 2 items`);
    await refused({ 'multi-auth': { auth_plugins: [{ 'key-auth': {} }, { 'no-such-auth': {} }] } }, `${p}no-such-auth plugin did not found`);
    await refused({ 'multi-auth': { auth_plugins: [{ 'key-auth': {} }, { 'limit-count': {} }] } }, `${p}limit-count plugin is not supported`);
    await refused({ 'multi-auth': { auth_plugins: [{ 'key-auth': { header: 5 } }, { 'basic-auth': {} }] } },
      `${p}plugin key-auth check schema failed: property "header" validation failed: wrong type: expected string, got number`);
    await refused({ 'multi-auth': { auth_plugins: [{ 'basic-auth': 'yes' }, { 'key-auth': {} }] } },
      `${p}plugin basic-auth check schema failed: wrong type: expected object, got string`);
  });

  it('the first plugin that authenticates wins; when none does, 401 Authorization Failed', async () => {
    await put(gw, 'consumers', { username: 'alice', plugins: { 'key-auth': { key: 'k-alice' } } });
    await put(gw, 'consumers', { username: 'bob', plugins: { 'basic-auth': { username: 'bob', password: 'pw-bob' } } });
    await put(gw, 'routes/ma', route('/ma', { 'multi-auth': { auth_plugins: [{ 'key-auth': { header: 'x-key' } }, { 'basic-auth': {} }] } }));
    const byKey = await untilRouted(gw, '/ma', (x) => x.status === 200, { headers: { 'X-Key': 'k-alice' } });
    assert.equal(byKey.echo?.headers['x-consumer-username'], 'alice');
    const basic = `Basic ${Buffer.from('bob:pw-bob').toString('base64')}`;
    const byBasic = await proxy(gw, '/ma', { headers: { Authorization: basic } });
    assert.equal(byBasic.status, 200);
    assert.equal(byBasic.echo?.headers['x-consumer-username'], 'bob');
    const none = await proxy(gw, '/ma', { headers: { 'X-Key': 'wrong' } });
    assert.equal(none.status, 401);
    assert.deepEqual(JSON.parse(none.body), { message: 'Authorization Failed' });
    assert.equal(none.headers['www-authenticate'], 'Basic realm="basic"', "the last refusal's challenge");
    const wrongPassword = await proxy(gw, '/ma', { headers: { Authorization: `Basic ${Buffer.from('bob:nope').toString('base64')}` } });
    assert.equal(wrongPassword.status, 401);
  });

  it('an auth plugin that reads the body (hmac-auth) can be the one that passes', async () => {
    await put(gw, 'consumers', { username: 'carol', plugins: { 'hmac-auth': { key_id: 'ck', secret_key: 'cs' } } });
    await put(gw, 'routes/ma', route('/ma', { 'multi-auth': { auth_plugins: [{ 'key-auth': {} }, { 'hmac-auth': {} }] } }));
    const sign = () => {
      const date = new Date().toUTCString();
      const sig = crypto.createHmac('sha256', 'cs').update(`ck\nPOST /ma\ndate: ${date}\n`).digest('base64');
      return { Date: date, Authorization: `Signature keyId="ck",algorithm="hmac-sha256",headers="@request-target date",signature="${sig}"` };
    };
    const ok = await untilRouted(gw, '/ma', (x) => x.status === 200, { method: 'POST', body: 'b', headers: sign() });
    assert.equal(ok.echo?.headers['x-consumer-username'], 'carol');
    assert.equal(ok.echo?.body, 'b');
    const no = await proxy(gw, '/ma', { method: 'POST', body: 'b' });
    assert.equal(no.status, 401);
    assert.equal(no.headers['www-authenticate'], 'hmac realm="hmac"');
  });
});

describe('proxy-mirror', () => {
  let mirror: Origin;
  /** Mirrored requests not yet taken, and tests waiting for one. */
  const arrived: Seen[] = [];
  const waiting: Array<(s: Seen) => void> = [];
  const nextMirrored = () => new Promise<Seen>((resolve) => {
    const s = arrived.shift();
    if (s) resolve(s);
    else waiting.push(resolve);
  });

  before(async () => {
    mirror = await startOrigin((req, res) => {
      const s = mirror.seen.at(-1)!;
      const w = waiting.shift();
      if (w) w(s);
      else arrived.push(s);
      if (req.url?.includes('hold')) return true; // never answered
      res.statusCode = 500;
      res.end('the mirror answer nobody sees');
      return true;
    });
  });
  after(() => mirror.close());

  it('refuses a host with a path or a scheme it cannot mirror to, and a bad path or ratio', async () => {
    const p = 'failed to check the configuration of plugin proxy-mirror err: ';
    await refused({ 'proxy-mirror': {} }, `${p}property "host" is required`);
    await refused({ 'proxy-mirror': { host: 'http://127.0.0.1:1/x' } },
      `${p}property "host" validation failed: failed to match pattern "^(http(s)?|grpc(s)?):\\\\/\\\\/([\\\\da-zA-Z.-]+|\\\\[[\\\\da-fA-F:]+\\\\])(:\\\\d+)?$" with "http://127.0.0.1:1/x"`);
    await refused({ 'proxy-mirror': { host: 'http://127.0.0.1', path: '/a?b' } },
      `${p}property "path" validation failed: failed to match pattern "^/[^?&]+$" with "/a?b"`);
    await refused({ 'proxy-mirror': { host: 'http://127.0.0.1', sample_ratio: 0 } }, `${p}property "sample_ratio" validation failed: expected 0 to be at least 1e-05`);
  });

  it('the request goes to the mirror too (method, URI, headers, body); the client gets the upstream answer', async () => {
    await put(gw, 'routes/pm', route('/pm', { 'proxy-mirror': { host: `http://${mirror.node}` } }));
    const opts = { method: 'POST', body: 'payload', headers: { 'X-Trace': 't1' } };
    const r = await untilRouted(gw, '/pm?a=1&b=2', (x) => x.status === 200 && x.echo?.port === o.port, opts);
    assert.equal(r.echo?.body, 'payload');
    let m = await nextMirrored();
    // earlier tries before the route was in place were not mirrored: the one seen is this route's
    assert.equal(m.method, 'POST');
    assert.equal(m.url, '/pm?a=1&b=2');
    assert.equal(m.body, 'payload');
    assert.equal(m.headers['x-trace'], 't1');
    assert.equal(m.headers.host, `127.0.0.1:${gw.proxyPort}`);
    assert.equal(m.headers.connection, 'close');
    await put(gw, 'routes/pm', route('/pm', { 'proxy-mirror': { host: `http://${mirror.node}`, path: '/copy' } }));
    await untilRouted(gw, '/pm?a=1', (x) => x.status === 200);
    for (m = await nextMirrored(); m.url.startsWith('/pm');) m = await nextMirrored();
    assert.equal(m.url, '/copy?a=1');
    await put(gw, 'routes/pm', route('/pm', { 'proxy-mirror': { host: `http://${mirror.node}`, path: '/copy', path_concat_mode: 'prefix' } }));
    await untilRouted(gw, '/pm?a=1', (x) => x.status === 200);
    for (m = await nextMirrored(); m.url === '/copy?a=1';) m = await nextMirrored();
    assert.equal(m.url, '/copy/pm?a=1');
  });

  it('a mirror that never answers or is not there does not hold the client up', async () => {
    await put(gw, 'routes/pm-hold', route('/pm-hold', { 'proxy-mirror': { host: `http://${mirror.node}` } }));
    const r = await untilRouted(gw, '/pm-hold', (x) => x.status === 200);
    assert.equal(r.echo?.url, '/pm-hold');
    assert.equal((await nextMirrored()).url, '/pm-hold');
    const gone = http.createServer();
    await new Promise<void>((resolve) => gone.listen(0, '127.0.0.1', resolve));
    const port = (gone.address() as AddressInfo).port;
    await new Promise((resolve) => gone.close(resolve));
    await put(gw, 'routes/pm-gone', route('/pm-gone', { 'proxy-mirror': { host: `http://127.0.0.1:${port}` } }));
    assert.equal((await untilRouted(gw, '/pm-gone', (x) => x.status === 200)).echo?.url, '/pm-gone');
  });
});

describe('brotli', () => {
  const page = '<p>' + 'a brotli test page, '.repeat(20) + '</p>';
  let site: Origin;
  before(async () => {
    site = await startOrigin((req, res) => {
      const u = req.url ?? '';
      res.setHeader('Content-Type', u.startsWith('/br/json') ? 'application/json' : 'text/html; charset=utf-8');
      if (u.startsWith('/br/etag-odd')) res.setHeader('ETag', 'unquoted');
      else if (u.startsWith('/br/etag-weak')) res.setHeader('ETag', 'W/"w1"');
      else res.setHeader('ETag', '"v1"');
      if (u.startsWith('/br/encoded')) res.setHeader('Content-Encoding', 'x-own');
      res.end(u.startsWith('/br/tiny') ? 'tiny' : page);
      return true;
    });
  });
  after(() => site.close());

  const siteRoute = (conf: Record<string, unknown>) => ({ uri: '/br/*', plugins: { brotli: conf }, upstream: { type: 'roundrobin', nodes: { [site.node]: 1 } } });
  /** The raw body bytes (proxy() reads text; brotli needs the bytes). */
  const fetchRaw = (path: string, headers: http.OutgoingHttpHeaders) => new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: gw.proxyPort, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
    }).on('error', reject);
  });

  it('refuses levels, windows and block sizes brotli does not have', async () => {
    const p = 'failed to check the configuration of plugin brotli err: ';
    await refused({ brotli: { comp_level: 12 } }, `${p}property "comp_level" validation failed: expected 12 to be at most 11`);
    await refused({ brotli: { lgwin: 9 } }, `${p}property "lgwin" validation failed: matches none of the enum values`);
    await refused({ brotli: { lgblock: 15 } }, `${p}property "lgblock" validation failed: matches none of the enum values`);
    await refused({ brotli: { mode: 3 } }, `${p}property "mode" validation failed: expected 3 to be at most 2`);
    await refused({ brotli: { types: [] } }, `${p}property "types" validation failed: object matches none of the required`);
  });

  it('a matching response to a client accepting br is compressed, its ETag weakened', async () => {
    await put(gw, 'routes/br', siteRoute({ vary: true, comp_level: 5, lgwin: 16, mode: 1 }));
    await untilRouted(gw, '/br/page', (x) => x.headers['content-encoding'] === 'br', { headers: { 'Accept-Encoding': 'gzip, br' } });
    const r = await fetchRaw('/br/page', { 'Accept-Encoding': 'gzip;q=0.5, br;q=0.8' });
    assert.equal(r.status, 200);
    assert.equal(r.headers['content-encoding'], 'br');
    assert.equal(r.headers['content-length'], undefined);
    assert.equal(r.headers.vary, 'Accept-Encoding');
    assert.equal(r.headers.etag, 'W/"v1"');
    assert.equal(zlib.brotliDecompressSync(r.body).toString(), page);
    assert.ok(r.body.length < page.length);
    assert.equal((await fetchRaw('/br/etag-weak', { 'Accept-Encoding': '*' })).headers.etag, 'W/"w1"');
    const odd = await fetchRaw('/br/etag-odd', { 'Accept-Encoding': 'br' });
    assert.equal(odd.headers['content-encoding'], 'br');
    assert.equal(odd.headers.etag, undefined);
  });

  it('left as it is: no br accepted (or q=0), too short, another type, already encoded', async () => {
    await put(gw, 'routes/br', siteRoute({}));
    await untilRouted(gw, '/br/page', (x) => x.headers['content-encoding'] === 'br' && x.headers.vary === undefined, { headers: { 'Accept-Encoding': 'br' } });
    for (const [path, ae] of [['/br/page', 'gzip'], ['/br/page', 'br;q=0'], ['/br/tiny', 'br'], ['/br/json', 'br'], ['/br/encoded', 'br']]) {
      const r = await fetchRaw(path, { 'Accept-Encoding': ae });
      assert.notEqual(r.headers['content-encoding'], 'br', `${path} ${ae}`);
      if (path === '/br/page') {
        assert.equal(r.body.toString(), page);
        assert.equal(r.headers.etag, '"v1"');
      }
    }
    await put(gw, 'routes/br', siteRoute({ types: '*', min_length: 1 }));
    const any = await untilRouted(gw, '/br/json', (x) => x.headers['content-encoding'] === 'br', { headers: { 'Accept-Encoding': 'br' } });
    assert.equal(any.status, 200);
    assert.equal(zlib.brotliDecompressSync((await fetchRaw('/br/tiny', { 'Accept-Encoding': 'br' })).body).toString(), 'tiny');
  });
});
