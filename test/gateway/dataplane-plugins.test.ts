/**
 * Plugins on the gateway's request path against loopback origins: the
 * answers APISIX's t/plugin/key-auth.t, basic-auth.t, limit-count.t,
 * proxy-rewrite.t, response-rewrite.t, cors.t, ip-restriction.t,
 * request-id.t and t/node/global-rule.t, plugin-configs.t describe,
 * restated in our own cases.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, startHoldingOrigin, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';

let gw: Gateway;
let o: Origin;

before(async () => {
  [gw, o] = await Promise.all([startGateway(), startOrigin()]);
  await put(gw, 'consumers', { username: 'jack', plugins: { 'key-auth': { key: 'auth-one' }, 'basic-auth': { username: 'foo', password: 'bar' } } });
  await put(gw, 'consumers', { username: 'anon' });
});
after(async () => { await Promise.all([gw.stop(), o.close()]); });

const up = () => ({ type: 'roundrobin', nodes: { [o.node]: 1 } });
const basic = (s: string) => `Basic ${Buffer.from(s).toString('base64')}`;

describe('key-auth', () => {
  it('no key: 401 Missing API key; a wrong one: 401 Invalid API key; both with WWW-Authenticate', async () => {
    await put(gw, 'routes/ka', { uri: '/ka', plugins: { 'key-auth': {} }, upstream: up() });
    const miss = await untilRouted(gw, '/ka', (r) => r.status === 401);
    assert.equal(miss.body, '{"message":"Missing API key in request"}\n');
    assert.equal(miss.headers['www-authenticate'], 'apikey realm="key"');
    const bad = await proxy(gw, '/ka', { headers: { apikey: 'nope' } });
    assert.equal(bad.status, 401);
    assert.equal(bad.body, '{"message":"Invalid API key in request"}\n');
  });

  it('the key in the header or the query passes with the consumer named to the upstream', async () => {
    const r = await proxy(gw, '/ka', { headers: { apikey: 'auth-one' } });
    assert.equal(r.status, 200);
    assert.equal(r.echo!.headers['x-consumer-username'], 'jack');
    assert.equal(r.echo!.headers.apikey, 'auth-one');
    const q = await proxy(gw, '/ka?apikey=auth-one&x=1');
    assert.equal(q.status, 200);
    assert.equal(q.echo!.url, '/ka?apikey=auth-one&x=1');
  });

  it('hide_credentials keeps the key from the upstream (header and query)', async () => {
    await put(gw, 'routes/ka', { uri: '/ka', plugins: { 'key-auth': { hide_credentials: true } }, upstream: up() });
    const r = await untilRouted(gw, '/ka', (x) => x.status === 200 && x.echo?.headers.apikey === undefined, { headers: { apikey: 'auth-one' } });
    assert.equal(r.echo!.headers['x-consumer-username'], 'jack');
    const q = await proxy(gw, '/ka?x=1&apikey=auth-one');
    assert.equal(q.echo!.url, '/ka?x=1');
  });

  it('anonymous_consumer: a request without a key goes on as that consumer', async () => {
    await put(gw, 'routes/kanon', { uri: '/kanon', plugins: { 'key-auth': { anonymous_consumer: 'anon' } }, upstream: up() });
    const r = await untilRouted(gw, '/kanon', (x) => x.status === 200);
    assert.equal(r.echo!.headers['x-consumer-username'], 'anon');
  });
});

describe('basic-auth', () => {
  it('answers APISIX\'s 401s with Basic realm="basic"', async () => {
    await put(gw, 'routes/ba', { uri: '/ba', plugins: { 'basic-auth': {} }, upstream: up() });
    const miss = await untilRouted(gw, '/ba', (r) => r.status === 401);
    assert.equal(miss.body, '{"message":"Missing authorization in request"}\n');
    assert.equal(miss.headers['www-authenticate'], 'Basic realm="basic"');
    const bad = await proxy(gw, '/ba', { headers: { authorization: 'Bearer x' } });
    assert.equal(bad.body, '{"message":"Invalid authorization in request"}\n');
    const wrong = await proxy(gw, '/ba', { headers: { authorization: basic('foo:baz') } });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body, '{"message":"Invalid user authorization"}\n');
    const nouser = await proxy(gw, '/ba', { headers: { authorization: basic('who:bar') } });
    assert.equal(nouser.body, '{"message":"Invalid user authorization"}\n');
  });

  it('the right user and password pass (whitespace removed, extra fields ignored); hide_credentials drops Authorization', async () => {
    const ok = await proxy(gw, '/ba', { headers: { authorization: basic('foo :bar:extra') } });
    assert.equal(ok.status, 200);
    assert.equal(ok.echo!.headers['x-consumer-username'], 'jack');
    assert.ok(ok.echo!.headers.authorization);
    await put(gw, 'routes/ba', { uri: '/ba', plugins: { 'basic-auth': { hide_credentials: true } }, upstream: up() });
    await untilRouted(gw, '/ba', (x) => x.status === 200 && x.echo?.headers.authorization === undefined, { headers: { authorization: basic('foo:bar') } });
  });
});

describe('consumer-restriction', () => {
  it('whitelist admits its consumers only (403 The consumer_name is forbidden.); blacklist refuses; allowed_by_methods', async () => {
    await put(gw, 'consumers', { username: 'rose', plugins: { 'key-auth': { key: 'rose-key' } } });
    await put(gw, 'routes/cr', { uri: '/cr', plugins: { 'key-auth': {}, 'consumer-restriction': { whitelist: ['jack'] } }, upstream: up() });
    const no = await untilRouted(gw, '/cr', (r) => r.status === 403, { headers: { apikey: 'rose-key' } });
    assert.equal(no.body, '{"message":"The consumer_name is forbidden."}\n');
    assert.equal((await proxy(gw, '/cr', { headers: { apikey: 'auth-one' } })).status, 200);
    await put(gw, 'routes/cr', { uri: '/cr', plugins: { 'key-auth': {}, 'consumer-restriction': { blacklist: ['jack'], rejected_msg: 'go away', rejected_code: 401 } }, upstream: up() });
    const bl = await untilRouted(gw, '/cr', (r) => r.status === 401, { headers: { apikey: 'auth-one' } });
    assert.equal(bl.body, '{"message":"go away"}\n');
    assert.equal((await proxy(gw, '/cr', { headers: { apikey: 'rose-key' } })).status, 200);
    await put(gw, 'routes/cr', { uri: '/cr', plugins: { 'key-auth': {}, 'consumer-restriction': { allowed_by_methods: [{ user: 'rose', methods: ['POST'] }] } }, upstream: up() });
    await untilRouted(gw, '/cr', (r) => r.status === 403, { headers: { apikey: 'rose-key' } });
    assert.equal((await proxy(gw, '/cr', { method: 'POST', headers: { apikey: 'rose-key' } })).status, 200);
    assert.equal((await proxy(gw, '/cr', { headers: { apikey: 'auth-one' } })).status, 200);
  });
});

describe('limit-count', () => {
  it('count 2 per 60 s: two pass with X-RateLimit-* headers, the third is 503', async () => {
    await put(gw, 'routes/lc', { uri: '/lc', plugins: { 'limit-count': { count: 2, time_window: 60 } }, upstream: up() });
    const first = await untilRouted(gw, '/lc', (r) => r.headers['x-ratelimit-limit'] === '2');
    assert.equal(first.status, 200);
    assert.equal(first.headers['x-ratelimit-remaining'], '1');
    assert.equal(first.headers['x-ratelimit-reset'], '60');
    const second = await proxy(gw, '/lc');
    assert.equal(second.headers['x-ratelimit-remaining'], '0');
    const third = await proxy(gw, '/lc');
    assert.equal(third.status, 503);
    assert.match(third.body, /503 Service/);
    assert.equal(third.headers['x-ratelimit-remaining'], '0');
  });

  it('rejected_code and rejected_msg; the key is the variable named', async () => {
    await put(gw, 'routes/lc2', { uri: '/lc2', plugins: { 'limit-count': { count: 1, time_window: 60, rejected_code: 429, rejected_msg: 'slow down', key: 'arg_who' } }, upstream: up() });
    await untilRouted(gw, '/lc2?who=a', (r) => r.headers['x-ratelimit-limit'] === '1');
    const r = await proxy(gw, '/lc2?who=a');
    assert.equal(r.status, 429);
    assert.equal(r.body, '{"error_msg":"slow down"}\n');
    assert.equal((await proxy(gw, '/lc2?who=b')).status, 200);
  });
});

describe('limit-req', () => {
  it('rate 0.1/s, burst 0, nodelay: the second request at once is refused (rejected_msg); burst 1 delays it instead', async () => {
    await put(gw, 'routes/lr', { uri: '/lr', plugins: { 'limit-req': { rate: 0.1, burst: 0, key: 'remote_addr', nodelay: true, rejected_code: 429, rejected_msg: 'too many' } }, upstream: up() });
    const first = await untilRouted(gw, '/lr', (r) => r.status === 200 || r.status === 429);
    const second = await proxy(gw, '/lr');
    assert.equal(first.status, 200);
    assert.equal(second.status, 429);
    assert.equal(second.body, '{"error_msg":"too many"}\n');
    await put(gw, 'routes/lr2', { uri: '/lr2', plugins: { 'limit-req': { rate: 4, burst: 1, key: 'arg_k' } }, upstream: up() });
    await untilRouted(gw, '/lr2?k=warm', (r) => r.status === 200);
    const t0 = performance.now();
    const [x, y] = await Promise.all([proxy(gw, '/lr2?k=a'), proxy(gw, '/lr2?k=a')]);
    const took = performance.now() - t0;
    assert.deepEqual([x.status, y.status], [200, 200]);
    // the second waited for the bucket: 1/4 s
    assert.ok(took >= 200, `took ${took} ms`);
    const z = await Promise.all([proxy(gw, '/lr2?k=b'), proxy(gw, '/lr2?k=b'), proxy(gw, '/lr2?k=b')]);
    assert.deepEqual(z.map((r) => r.status).sort(), [200, 200, 503]);
  });
});

describe('limit-conn', () => {
  it('conn 1, burst 0: a second request while one is in flight is refused; once it is over the next passes', async () => {
    const held = await startHoldingOrigin();
    try {
      await put(gw, 'routes/lconn', { uri: '/lconn', plugins: { 'limit-conn': { conn: 1, burst: 0, default_conn_delay: 0.1, key: 'remote_addr', rejected_msg: 'busy' } }, upstream: { type: 'roundrobin', nodes: { [held.node]: 1 } } });
      await untilRouted(gw, '/lconn', (r) => r.status === 200);
      const pending = proxy(gw, '/lconn?hold');
      const release = await held.holding();
      const refused = await proxy(gw, '/lconn');
      assert.equal(refused.status, 503);
      assert.equal(refused.body, '{"error_msg":"busy"}\n');
      release();
      assert.equal((await pending).body, 'held');
      // the place is given back in the log phase, just after the answer went out
      await untilRouted(gw, '/lconn', (r) => r.status === 200);
    } finally {
      await held.close();
    }
  });
});

describe('proxy-rewrite and response-rewrite', () => {
  it('proxy-rewrite: uri, host, method and headers set/add/remove', async () => {
    await put(gw, 'routes/pr', { uri: '/pr', plugins: { 'proxy-rewrite': {
      uri: '/new/$arg_x', host: 'rewritten.test', method: 'POST',
      headers: { set: { 'X-Api': 'v2' }, add: { 'X-Add': 'a' }, remove: ['X-Drop'] },
    } }, upstream: up() });
    const r = await untilRouted(gw, '/pr?x=7', (x) => x.echo?.url.startsWith('/new/') === true, { headers: { 'x-drop': '1', 'x-api': 'v1' } });
    assert.equal(r.echo!.url, '/new/7?x=7');
    assert.equal(r.echo!.headers.host, 'rewritten.test');
    assert.equal(r.echo!.method, 'POST');
    assert.equal(r.echo!.headers['x-api'], 'v2');
    assert.equal(r.echo!.headers['x-add'], 'a');
    assert.equal(r.echo!.headers['x-drop'], undefined);
  });

  it('proxy-rewrite: regex_uri with captures', async () => {
    await put(gw, 'routes/prx', { uri: '/test/*', plugins: { 'proxy-rewrite': { regex_uri: ['^/test/(.*)/(.*)', '/$2/$1'] } }, upstream: up() });
    const r = await untilRouted(gw, '/test/a/b?q=1', (x) => x.status === 200);
    assert.equal(r.echo!.url, '/b/a?q=1');
  });

  it('response-rewrite: status, headers and body', async () => {
    await put(gw, 'routes/rr', { uri: '/rr', plugins: { 'response-rewrite': {
      status_code: 201, body: '{"code":"ok"}\n', headers: { set: { 'X-Server-id': '3' }, remove: ['Content-Type'] },
    } }, upstream: up() });
    const r = await untilRouted(gw, '/rr', (x) => x.status === 201);
    assert.equal(r.body, '{"code":"ok"}\n');
    assert.equal(r.headers['x-server-id'], '3');
    assert.equal(r.headers['content-length'], undefined);
  });

  it('response-rewrite with vars: only responses that match are rewritten', async () => {
    await put(gw, 'routes/rrv', { uri: '/rrv', plugins: { 'response-rewrite': { vars: [['status', '==', 404]], body: 'gone\n' } }, upstream: up() });
    const r = await untilRouted(gw, '/rrv', (x) => x.status === 200);
    assert.ok(r.echo);
  });
});

describe('cors, ip-restriction, request-id', () => {
  it('cors: OPTIONS is answered 200 by the gateway with the CORS headers; other requests get them too', async () => {
    await put(gw, 'routes/cors', { uri: '/cors', plugins: { cors: {} }, upstream: up() });
    const pre = await untilRouted(gw, '/cors', (x) => x.status === 200, { method: 'OPTIONS', headers: { origin: 'http://a.test' } });
    assert.equal(pre.body, '');
    assert.equal(pre.headers['access-control-allow-origin'], '*');
    assert.equal(pre.headers['access-control-allow-methods'], '*');
    assert.equal(pre.headers['access-control-allow-headers'], '*');
    assert.equal(pre.headers['access-control-max-age'], '5');
    assert.equal(o.seen.filter((s) => s.method === 'OPTIONS').length, 0);
    const get = await proxy(gw, '/cors', { headers: { origin: 'http://a.test' } });
    assert.equal(get.headers['access-control-allow-origin'], '*');
    assert.ok(get.echo);
  });

  it('cors: a list of origins echoes a listed Origin with Vary: Origin, and says nothing to others', async () => {
    await put(gw, 'routes/cors2', { uri: '/cors2', plugins: { cors: { allow_origins: 'http://a.test,http://b.test', allow_methods: '**', allow_credential: true, allow_headers: 'x-a' } }, upstream: up() });
    const r = await untilRouted(gw, '/cors2', (x) => x.headers['access-control-allow-origin'] === 'http://b.test', { headers: { origin: 'http://b.test' } });
    assert.equal(r.headers.vary, 'Origin');
    assert.equal(r.headers['access-control-allow-credentials'], 'true');
    assert.equal(r.headers['access-control-allow-methods'], 'GET,POST,PUT,DELETE,PATCH,HEAD,OPTIONS,CONNECT,TRACE');
    const other = await proxy(gw, '/cors2', { headers: { origin: 'http://c.test' } });
    assert.equal(other.headers['access-control-allow-origin'], undefined);
  });

  it('ip-restriction: a blacklisted client gets 403 with the message; a whitelist without it too', async () => {
    await put(gw, 'routes/ip', { uri: '/ip', plugins: { 'ip-restriction': { blacklist: ['127.0.0.0/24'] } }, upstream: up() });
    const r = await untilRouted(gw, '/ip', (x) => x.status === 403);
    assert.equal(r.body, '{"message":"Your IP address is not allowed"}\n');
    await put(gw, 'routes/ip', { uri: '/ip', plugins: { 'ip-restriction': { whitelist: ['127.0.0.1'] } }, upstream: up() });
    await untilRouted(gw, '/ip', (x) => x.status === 200);
    await put(gw, 'routes/ip', { uri: '/ip', plugins: { 'ip-restriction': { whitelist: ['10.0.0.0/8'], message: 'no', response_code: 404 } }, upstream: up() });
    const nf = await untilRouted(gw, '/ip', (x) => x.status === 404);
    assert.equal(nf.body, '{"message":"no"}\n');
  });

  it('request-id: a new id goes upstream and comes back; a client\'s own is kept', async () => {
    await put(gw, 'routes/rid', { uri: '/rid', plugins: { 'request-id': {} }, upstream: up() });
    const r = await untilRouted(gw, '/rid', (x) => x.headers['x-request-id'] !== undefined);
    assert.match(String(r.headers['x-request-id']), /^[0-9a-f-]{36}$/);
    assert.equal(r.echo!.headers['x-request-id'], r.headers['x-request-id']);
    const own = await proxy(gw, '/rid', { headers: { 'x-request-id': 'mine' } });
    assert.equal(own.headers['x-request-id'], 'mine');
  });
});

describe('real-ip', () => {
  it('the client address comes from the source variable: upstream X-Real-IP, and ip-restriction after it sees it', async () => {
    await put(gw, 'routes/rip', { uri: '/rip', plugins: { 'real-ip': { source: 'http_x_real_client' }, 'ip-restriction': { blacklist: ['1.2.3.0/24'] } }, upstream: up() });
    const r = await untilRouted(gw, '/rip', (x) => x.status === 200 && x.echo?.headers['x-real-ip'] === '5.6.7.8', { headers: { 'x-real-client': '5.6.7.8:9000' } });
    assert.equal(r.echo!.headers['x-forwarded-for'], '5.6.7.8');
    assert.equal((await proxy(gw, '/rip', { headers: { 'x-real-client': '1.2.3.4' } })).status, 403);
    assert.equal((await proxy(gw, '/rip', { headers: { 'x-real-client': 'not-an-ip' } })).echo?.headers['x-real-ip'], '127.0.0.1');
  });

  it('X-Forwarded-For: the last address; recursive with trusted_addresses: the last untrusted one; an untrusted peer changes nothing', async () => {
    await put(gw, 'routes/rip2', { uri: '/rip2', plugins: { 'real-ip': { source: 'http_x_forwarded_for', trusted_addresses: ['127.0.0.0/24'] } }, upstream: up() });
    const r = await untilRouted(gw, '/rip2', (x) => x.echo?.headers['x-real-ip'] === '10.0.0.2', { headers: { 'x-forwarded-for': '10.0.0.1, 10.0.0.2' } });
    assert.equal(r.status, 200);
    await put(gw, 'routes/rip2', { uri: '/rip2', plugins: { 'real-ip': { source: 'http_x_forwarded_for', recursive: true, trusted_addresses: ['127.0.0.0/24', '10.0.0.0/8'] } }, upstream: up() });
    await untilRouted(gw, '/rip2', (x) => x.echo?.headers['x-real-ip'] === '9.9.9.9', { headers: { 'x-forwarded-for': '8.8.8.8, 9.9.9.9, 10.0.0.2' } });
    await put(gw, 'routes/rip2', { uri: '/rip2', plugins: { 'real-ip': { source: 'http_x_forwarded_for', trusted_addresses: ['10.0.0.0/8'] } }, upstream: up() });
    await untilRouted(gw, '/rip2', (x) => x.echo?.headers['x-real-ip'] === '127.0.0.1', { headers: { 'x-forwarded-for': '10.0.0.1' } });
  });
});

describe('redirect', () => {
  it('uri with vars and ret_code; regex_uri; http_to_https 301 for GET, 308 for POST', async () => {
    await put(gw, 'routes/redir', { uri: '/redir/*', plugins: { redirect: { uri: '/new$uri', ret_code: 301, append_query_string: true } }, upstream: up() });
    const r = await untilRouted(gw, '/redir/a?b=1', (x) => x.status === 301);
    assert.equal(r.headers.location, '/new/redir/a?b=1');
    assert.match(r.body, /301 Moved Permanently/);
    await put(gw, 'routes/redir', { uri: '/redir/*', plugins: { redirect: { regex_uri: ['^/redir/(.*)', '/r/$1'] } }, upstream: up() });
    const x = await untilRouted(gw, '/redir/z', (y) => y.status === 302);
    assert.equal(x.headers.location, '/r/z');
    await put(gw, 'routes/redir', { uri: '/redir/*', plugins: { redirect: { http_to_https: true } }, upstream: up() });
    const h = await untilRouted(gw, '/redir/q?s=1', (y) => y.status === 301, { headers: { host: 'site.test' } });
    assert.equal(h.headers.location, 'https://site.test/redir/q?s=1');
    assert.equal((await proxy(gw, '/redir/q', { method: 'POST', headers: { host: 'site.test' } })).status, 308);
    // the client's X-Forwarded-Proto is replaced by the scheme (APISIX trusts it only from apisix.trusted_addresses)
    assert.equal((await proxy(gw, '/redir/q', { headers: { host: 'site.test', 'x-forwarded-proto': 'https' } })).status, 301);
  });
});

describe('gzip', () => {
  let page: Origin;
  before(async () => {
    page = await startOrigin((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      res.setHeader('Content-Type', u.searchParams.get('type') ?? 'text/html');
      if (u.searchParams.has('vary')) res.setHeader('Vary', 'upstream');
      res.end('x'.repeat(Number(u.searchParams.get('len') ?? 20)));
      return true;
    });
  });
  after(() => page.close());
  const ae = { 'accept-encoding': 'gzip' };

  it('{}: a 20-byte text/html answer is compressed for a client that accepts gzip; not without Accept-Encoding', async () => {
    await put(gw, 'routes/gz', { uri: '/gz', plugins: { gzip: {} }, upstream: { type: 'roundrobin', nodes: { [page.node]: 1 } } });
    const r = await untilRouted(gw, '/gz', (x) => x.headers['content-encoding'] === 'gzip', { headers: ae });
    assert.equal(r.headers['content-length'], undefined);
    assert.equal(r.headers.vary, undefined);
    const plain = await proxy(gw, '/gz');
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.equal(plain.body, 'x'.repeat(20));
  });

  it('min_length, types, "*" and vary as APISIX decides them', async () => {
    await put(gw, 'routes/gz', { uri: '/gz', plugins: { gzip: { min_length: 21, types: ['text/plain', 'text/xml'], vary: true } }, upstream: { type: 'roundrobin', nodes: { [page.node]: 1 } } });
    await untilRouted(gw, '/gz?type=text/xml&len=30', (x) => x.headers['content-encoding'] === 'gzip', { headers: ae });
    assert.equal((await proxy(gw, '/gz?type=text/xml&len=20', { headers: ae })).headers['content-encoding'], undefined);
    assert.equal((await proxy(gw, '/gz?type=text/html&len=30', { headers: ae })).headers['content-encoding'], undefined);
    const cs = await proxy(gw, '/gz?type=text/plain;%20charset=UTF-8&len=30&vary', { headers: ae });
    assert.equal(cs.headers['content-encoding'], 'gzip');
    assert.equal(cs.headers.vary, 'upstream, Accept-Encoding');
    await put(gw, 'routes/gz', { uri: '/gz', plugins: { gzip: { types: '*' } }, upstream: { type: 'roundrobin', nodes: { [page.node]: 1 } } });
    await untilRouted(gw, '/gz?type=video/3gpp', (x) => x.headers['content-encoding'] === 'gzip', { headers: ae });
  });
});

describe('composition', () => {
  it('_meta.filter runs a plugin only for the requests it holds for; _meta.disable leaves it out', async () => {
    await put(gw, 'routes/meta', { uri: '/meta', plugins: { 'response-rewrite': { headers: { set: { 'X-Filtered': 'yes' } }, _meta: { filter: [['arg_v', '==', '1']] } } }, upstream: up() });
    await untilRouted(gw, '/meta?v=1', (x) => x.headers['x-filtered'] === 'yes');
    assert.equal((await proxy(gw, '/meta?v=2')).headers['x-filtered'], undefined);
    await put(gw, 'routes/meta', { uri: '/meta', plugins: { 'key-auth': { _meta: { disable: true } } }, upstream: up() });
    await untilRouted(gw, '/meta', (x) => x.status === 200 && x.headers['x-filtered'] === undefined);
  });

  it('global rules run for every request, also before a 404', async () => {
    await put(gw, 'global_rules/1', { plugins: { 'response-rewrite': { headers: { set: { 'X-Global': 'yes' } } } } });
    const r = await untilRouted(gw, '/no-such-route', (x) => x.headers['x-global'] === 'yes');
    assert.equal(r.status, 404);
    await gw.admin('DELETE', '/gateway/admin/global_rules/1');
    await untilRouted(gw, '/no-such-route', (x) => x.headers['x-global'] === undefined);
  });

  it('precedence: route > plugin_config > service; the consumer\'s plugins over the route\'s', async () => {
    await put(gw, 'services/ps', { plugins: { 'response-rewrite': { headers: { set: { 'X-From': 'service' } } } }, upstream: up() });
    await put(gw, 'plugin_configs/pc', { plugins: { 'response-rewrite': { headers: { set: { 'X-From': 'plugin_config' } } } } });
    await put(gw, 'routes/prec', { uri: '/prec', service_id: 'ps' });
    await untilRouted(gw, '/prec', (x) => x.headers['x-from'] === 'service');
    await put(gw, 'routes/prec', { uri: '/prec', service_id: 'ps', plugin_config_id: 'pc' });
    await untilRouted(gw, '/prec', (x) => x.headers['x-from'] === 'plugin_config');
    await put(gw, 'routes/prec', { uri: '/prec', service_id: 'ps', plugin_config_id: 'pc', plugins: { 'response-rewrite': { headers: { set: { 'X-From': 'route' } } } } });
    await untilRouted(gw, '/prec', (x) => x.headers['x-from'] === 'route');
    await put(gw, 'consumers', { username: 'limited', plugins: { 'key-auth': { key: 'lim-key' }, 'limit-count': { count: 1, time_window: 60, rejected_code: 429 } } });
    await put(gw, 'routes/cons', { uri: '/cons', plugins: { 'key-auth': {} }, upstream: up() });
    await untilRouted(gw, '/cons', (x) => x.headers['x-ratelimit-limit'] === '1', { headers: { apikey: 'lim-key' } });
    assert.equal((await proxy(gw, '/cons', { headers: { apikey: 'lim-key' } })).status, 429);
    assert.equal((await proxy(gw, '/cons', { headers: { apikey: 'auth-one' } })).status, 200);
  });
});
