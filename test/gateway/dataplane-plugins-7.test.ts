/**
 * The plugin triage's second round (scripts/apisix-plugin-triage.ts): proxy-rewrite's PCRE
 * regex_uri, `$uri` after a rewrite, the unsafe real request uri and array `set`; the
 * X-Forwarded-* headers as APISIX writes them before the plugins; redirect's https port;
 * what response-rewrite drops when it replaces the body; `$balancer_ip`; the limiters'
 * schemas (variables as counts), limit-count's group check.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { freePorts } from '../kit/server.ts';
import { defaultYaml, startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { assertRefused, proxy, put, routeTo, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';

let gw: Gateway;
let attrGw: Gateway;
let o: Origin;
let sslPort: number;

/** A gateway with a TLS port of its own (`apisix.ssl.listen`), and more config.yaml `extra`. */
const withSsl = (port: number, extra = '') => defaultYaml().replace('nginx_config:', `  ssl:\n    listen:\n      - ip: 127.0.0.1\n        port: ${port}\nnginx_config:`) + extra;

before(async () => {
  const ports = await freePorts(2);
  sslPort = ports[0];
  // the origin answers a uri naming validators with an upstream's validators and length
  o = await startOrigin((req, res) => {
    if (!req.url?.includes('validators')) return false;
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Last-Modified': 'Wed, 21 Oct 2015 07:28:00 GMT', ETag: '"abc"', 'Content-Length': '9' });
    res.end('upstream\n');
    return true;
  });
  [gw, attrGw] = await Promise.all([
    startGateway({ yaml: withSsl(sslPort) }),
    // this one trusts the loopback peer's X-Forwarded-* (apisix.trusted_addresses)
    startGateway({ yaml: withSsl(ports[1], 'plugin_attr:\n  redirect:\n    https_port: 8443\n').replace('apisix:\n', 'apisix:\n  trusted_addresses:\n    - 127.0.0.1\n') }),
  ]);
});
after(async () => { await Promise.all([gw.stop(), attrGw.stop(), o.close()]); });

const route = (uri: string, plugins: Record<string, unknown>) => routeTo(o, uri, plugins);
const refused = (plugins: Record<string, unknown>, message: string) => assertRefused(gw, o, plugins, message);

/** A raw request (the request target sent exactly as written, which node's http client would not always do). */
function rawGet(port: number, target: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: target, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks).toString()));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('proxy-rewrite as proxy-rewrite.lua', () => {
  it('regex_uri is PCRE, as ngx.re compiles it: (?P<name>), possessive ++ and \\z work; a path it does not match goes on as it came', async () => {
    await put(gw, 'routes/pcre', route('/pcre/*', { 'proxy-rewrite': { regex_uri: ['^/pcre/(?P<id>\\d++)\\z', '/id/$1'] } }));
    const r = await untilRouted(gw, '/pcre/42', (x) => x.echo !== undefined);
    assert.equal(r.echo!.url, '/id/42');
    assert.equal((await proxy(gw, '/pcre/42x')).echo!.url, '/pcre/42x');
  });

  it('a rewritten uri is $uri for the Lua after it (ngx.req.set_uri), the arguments kept', async () => {
    await put(gw, 'routes/seturi', route('/seturi', {
      'proxy-rewrite': { uri: '/uri', host: 'test.com:6443' },
      'serverless-post-function': { phase: 'access', functions: ["return function() if ngx.var.uri ~= '/uri' then ngx.exit(418) end end"] },
    }));
    const r = await untilRouted(gw, '/seturi?a=1', (x) => x.status !== 404);
    assert.equal(r.status, 200);
    assert.equal(r.echo!.url, '/uri?a=1');
    assert.equal(r.echo!.headers.host, 'test.com:6443');
  });

  it('the new path is escaped as ngx_escape_uri does, a ? written in the uri starts its arguments; unsafe mode sends the client\'s target as it came', async () => {
    await put(gw, 'routes/esc', route('/esc/*', { 'proxy-rewrite': { regex_uri: ['^/esc/(.*)', '/to/$1'] } }));
    await put(gw, 'routes/q', route('/q', { 'proxy-rewrite': { uri: '/to?x=1' } }));
    await put(gw, 'routes/unsafe', route('/unsafe/*', { 'proxy-rewrite': { use_real_request_uri_unsafe: true } }));
    const e = await untilRouted(gw, '/esc/a%20b', (x) => x.echo !== undefined);
    assert.equal(e.echo!.url, '/to/a%20b');
    assert.equal((await untilRouted(gw, '/q?y=2', (x) => x.echo !== undefined)).echo!.url, '/to?x=1&y=2');
    await untilRouted(gw, '/unsafe/x', (x) => x.echo !== undefined);
    assert.equal((JSON.parse(await rawGet(gw.proxyPort, '/unsafe/%5Fa?b=%20')) as { url: string }).url, '/unsafe/%5Fa?b=%20');
  });

  it('set with an array sends the header once per value', async () => {
    await put(gw, 'routes/multi', route('/multi', { 'proxy-rewrite': { headers: { set: { 'X-Multi': ['one', '$http_x_src'] } } } }));
    const r = await untilRouted(gw, '/multi', (x) => x.echo !== undefined, { headers: { 'X-Multi': 'client', 'X-Src': 'src' } });
    // node joins a repeated header with ', ': two values, the client's gone
    assert.equal(r.echo!.headers['x-multi'], 'one, src');
  });
});

describe('X-Forwarded-* as APISIX writes them', () => {
  it('Host with its port and that port; the client\'s own values replaced, Forwarded dropped; a plugin may set them', async () => {
    await put(gw, 'routes/xf', route('/xf', { 'proxy-rewrite': { host: 'elsewhere.test' } }));
    await put(gw, 'routes/xf-set', route('/xf-set', { 'proxy-rewrite': { headers: { set: { 'X-Forwarded-Host': 'test.com', 'X-Forwarded-Port': '9882' } } } }));
    const sent = { Host: 'site.test:8080', 'X-Forwarded-Host': 'forged.test', 'X-Forwarded-Port': '1', 'X-Forwarded-Proto': 'https', Forwarded: 'for=1.2.3.4' };
    const r = await untilRouted(gw, '/xf', (x) => x.echo !== undefined, { headers: sent });
    assert.equal(r.echo!.headers.host, 'elsewhere.test');
    assert.equal(r.echo!.headers['x-forwarded-host'], 'site.test:8080');
    assert.equal(r.echo!.headers['x-forwarded-port'], '8080');
    assert.equal(r.echo!.headers['x-forwarded-proto'], 'http');
    assert.equal(r.echo!.headers.forwarded, undefined);
    const plain = await proxy(gw, '/xf', { headers: { Host: 'site.test' } });
    assert.equal(plain.echo!.headers['x-forwarded-port'], String(gw.proxyPort));
    const s = await untilRouted(gw, '/xf-set', (x) => x.echo !== undefined);
    assert.equal(s.echo!.headers['x-forwarded-host'], 'test.com');
    assert.equal(s.echo!.headers['x-forwarded-port'], '9882');
  });
});

describe('apisix.trusted_addresses', () => {
  it('a trusted peer\'s own X-Forwarded-* go upstream as it sent them (a header it did not send is still written)', async () => {
    await put(attrGw, 'routes/xf', route('/xf', {}));
    const sent = { Host: 'site.test:8080', 'X-Forwarded-Host': 'front.test', 'X-Forwarded-Proto': 'https', Forwarded: 'for=1.2.3.4', 'X-Forwarded-For': '1.2.3.4' };
    const r = await untilRouted(attrGw, '/xf', (x) => x.echo !== undefined, { headers: sent });
    assert.equal(r.echo!.headers['x-forwarded-host'], 'front.test');
    assert.equal(r.echo!.headers['x-forwarded-proto'], 'https');
    assert.equal(r.echo!.headers['x-forwarded-port'], '8080');
    assert.equal(r.echo!.headers.forwarded, 'for=1.2.3.4');
    assert.equal(r.echo!.headers['x-forwarded-for'], '1.2.3.4, 127.0.0.1');
  });
});

describe('redirect http_to_https', () => {
  it('names apisix.ssl.listen\'s port, or plugin_attr.redirect.https_port; the client\'s X-Forwarded-Proto does not count', async () => {
    const conf = route('/to-https/*', { redirect: { http_to_https: true } });
    await Promise.all([put(gw, 'routes/https', conf), put(attrGw, 'routes/https', conf)]);
    const headers = { Host: 'site.test', 'X-Forwarded-Proto': 'https' };
    const r = await untilRouted(gw, '/to-https/a?b=1', (x) => x.status === 301, { headers });
    assert.equal(r.headers.location, `https://site.test:${sslPort}/to-https/a?b=1`);
    // attrGw trusts the loopback peer: its X-Forwarded-Proto counts there
    const a = await untilRouted(attrGw, '/to-https/a', (x) => x.status === 301, { headers: { Host: 'site.test' } });
    assert.equal(a.headers.location, 'https://site.test:8443/to-https/a');
    assert.equal((await proxy(attrGw, '/to-https/a', { headers })).status, 200);
  });
});

describe('response-rewrite and the upstream\'s validators', () => {
  it('a replaced body goes without the upstream\'s Last-Modified, ETag and Content-Length, on HEAD too; $balancer_ip:$balancer_port is the node', async () => {
    await put(gw, 'routes/validators', route('/validators', {
      'response-rewrite': { body: 'new body\n', headers: { set: { 'X-Node': '$balancer_ip:$balancer_port' } } },
    }));
    const r = await untilRouted(gw, '/validators', (x) => x.body === 'new body\n');
    for (const name of ['last-modified', 'etag', 'content-length']) assert.equal(r.headers[name], undefined, name);
    assert.equal(r.headers['x-node'], o.node);
    const head = await proxy(gw, '/validators', { method: 'HEAD' });
    for (const name of ['last-modified', 'etag', 'content-length']) assert.equal(head.headers[name], undefined, `HEAD ${name}`);
  });
  it('filters: $1 is PCRE\'s first capture (after an atomic group too); max_resp_body_size cuts the body before filtering', async () => {
    await put(gw, 'routes/filters', route('/filters', { 'response-rewrite': { filters: [{ regex: '(?>up)(stream)', replace: '[$1]' }] } }));
    await put(gw, 'routes/cut', route('/cut', { 'response-rewrite': { max_resp_body_size: 4, filters: [{ regex: 'x', replace: 'y' }] } }));
    assert.equal((await untilRouted(gw, '/filters?validators', (x) => x.status === 200)).body, '[stream]\n');
    // the echo's JSON, cut after 4 bytes
    assert.equal((await untilRouted(gw, '/cut', (x) => x.status === 200 && x.body.length < 10)).body, '{"po');
  });
});

describe('limit-count and limit-conn as APISIX checks them', () => {
  const p = (name: string) => `failed to check the configuration of plugin ${name} err: `;

  it('schema messages: a count is an integer above 0 or a string; conn is required', async () => {
    await refused({ 'limit-count': { count: -100, time_window: 60 } }, `${p('limit-count')}property "count" validation failed: value should match only one schema, but matches none`);
    await refused({ 'limit-conn': { conn: -1, burst: 0, default_conn_delay: 0.1, key: 'remote_addr' } },
      `${p('limit-conn')}property "conn" validation failed: value should match only one schema, but matches none`);
    await refused({ 'limit-conn': { burst: 0, default_conn_delay: 0.1, key: 'remote_addr' } }, `${p('limit-conn')}value should match only one schema, but matches none`);
    // a redis policy needs its server named, as APISIX's if/then on `policy` says (Gatehouse still counts locally)
    await refused({ 'limit-count': { count: 1, time_window: 60, policy: 'redis' } }, `${p('limit-count')}then clause did not match`);
  });

  it('the confs of one group must be the same', async () => {
    await put(gw, 'routes/g1', route('/g1', { 'limit-count': { count: 2, time_window: 60, group: 'shared' } }));
    await refused({ 'limit-count': { count: 3, time_window: 60, group: 'shared' } }, `${p('limit-count')}group conf mismatched`);
    await put(gw, 'routes/g2', route('/g2', { 'limit-count': { count: 2, time_window: 60, group: 'shared' } }));
  });

  it('a count from a variable is read per request; one that is no positive integer answers 500', async () => {
    await put(gw, 'routes/varcount', route('/varcount', { 'limit-count': { count: '$http_x_count', time_window: 60, key: 'http_x_who' } }));
    const first = await untilRouted(gw, '/varcount', (x) => x.status !== 404, { headers: { 'X-Count': '1', 'X-Who': 'a' } });
    assert.equal(first.status, 200);
    assert.equal(first.headers['x-ratelimit-limit'], '1');
    assert.equal((await proxy(gw, '/varcount', { headers: { 'X-Count': '1', 'X-Who': 'a' } })).status, 503);
    assert.equal((await proxy(gw, '/varcount', { headers: { 'X-Count': 'many', 'X-Who': 'b' } })).status, 500);
  });

  it('rules: each rule whose key resolves counts on its own, its headers prefixed (its header_prefix, else its number); none applies: 500', async () => {
    await put(gw, 'routes/rules', route('/rules', { 'limit-count': { rejected_code: 429, rules: [
      { key: '${http_user}', count: 1, time_window: 60, header_prefix: 'User' },
      { key: '${http_project}', count: '${http_project_count}', time_window: 60 },
    ] } }));
    const user = await untilRouted(gw, '/rules', (x) => x.status !== 404, { headers: { User: 'jack' } });
    assert.equal(user.status, 200);
    assert.equal(user.headers['x-user-ratelimit-limit'], '1');
    assert.equal((await proxy(gw, '/rules', { headers: { User: 'jack' } })).status, 429);
    const project = await proxy(gw, '/rules', { headers: { Project: 'p', 'Project-Count': '2' } });
    assert.equal(project.status, 200);
    assert.equal(project.headers['x-2-ratelimit-remaining'], '1');
    assert.equal((await proxy(gw, '/rules')).status, 500);
    await refused({ 'limit-count': { count: 1, time_window: 60, rules: [{ key: 'a', count: 1, time_window: 1 }] } },
      `${p('limit-count')}count/time_window and rules cannot be specified at the same time`);
    await refused({ 'limit-count': { rules: [{ key: '$a', count: 1, time_window: 1 }, { key: '$a', count: 2, time_window: 1 }] } },
      `${p('limit-count')}duplicate key '$a' in rules`);
  });

  it('limit-conn rules: a conn from a variable per rule; a rule whose key does not resolve is left out', async () => {
    await put(gw, 'routes/conn-rules', route('/conn-rules', { 'limit-conn': { default_conn_delay: 0.1, rejected_code: 429, rules: [
      { key: '${http_user}', conn: '${http_user_conn}', burst: 0 },
    ] } }));
    const r = await untilRouted(gw, '/conn-rules', (x) => x.status !== 404, { headers: { User: 'jack', 'User-Conn': '1' } });
    assert.equal(r.status, 200);
    assert.equal((await proxy(gw, '/conn-rules')).status, 500);
  });
});

describe('_meta.error_response', () => {
  it('answers instead of what a failing plugin said: a table as JSON, a string as it is; a plugin that passes is not touched', async () => {
    await put(gw, 'routes/err-table', route('/err-table', { 'key-auth': { _meta: { error_response: { message: 'Missing credential in request' } } } }));
    await put(gw, 'routes/err-text', route('/err-text', { 'key-auth': { _meta: { error_response: 'no entry' } } }));
    const t = await untilRouted(gw, '/err-table', (x) => x.status === 401);
    assert.equal(t.body, '{"message":"Missing credential in request"}\n');
    assert.equal((await untilRouted(gw, '/err-text', (x) => x.status === 401)).body, 'no entry');
  });
});
