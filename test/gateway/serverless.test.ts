/**
 * serverless-pre-function and serverless-post-function on the worker's Lua
 * VM, against a loopback origin: the Admin API refuses functions that do not
 * compile with APISIX's messages, and the functions answer, log, rewrite
 * the upstream URI, set headers and filter bodies as APISIX's
 * t/plugin/serverless.t expects (restated in our own cases).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';

let gw: Gateway;
let o: Origin;

before(async () => {
  [gw, o] = await Promise.all([startGateway(), startOrigin((req, res) => {
    if (req.url !== '/text') return false;
    res.setHeader('Content-Type', 'text/plain');
    res.end('hello world\n');
    return true;
  })]);
});
after(async () => { await Promise.all([gw.stop(), o.close()]); });

const up = () => ({ type: 'roundrobin', nodes: { [o.node]: 1 } });
const errorLog = () => fs.readFileSync(path.join(gw.prefix, 'logs', 'error.log'), 'utf8');

/** Waits until the error log has `text` (the log phase runs after the answer went out). */
async function untilLogged(text: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    if (errorLog().includes(text)) return;
    await sleep(10);
  }
  assert.fail(`error.log never had ${JSON.stringify(text)}`);
}

describe('serverless: the Admin API checks the functions', () => {
  const route = (fn: string, extra: Record<string, unknown> = {}) => ({
    uri: '/x', plugins: { 'serverless-pre-function': { functions: [fn], ...extra } }, upstream: up(),
  });

  it('a source that does not compile: failed to loadstring with Lua\'s message', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/routes/bad', route('return function( end'));
    assert.equal(r.status, 400);
    const msg = (r.json as { error_msg: string }).error_msg;
    assert.match(msg, /^failed to check the configuration of plugin serverless-pre-function err: failed to loadstring: \[string "return function\( end"\]:1: /);
  });

  it('a bare name: LuaJIT\'s words, \'=\' expected near \'<eof>\'', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/routes/bad', route('a'));
    assert.equal(r.status, 400);
    assert.deepEqual(r.json, { error_msg: 'failed to check the configuration of plugin serverless-pre-function err: failed to loadstring: [string "a"]:1: \'=\' expected near \'<eof>\'' });
  });

  it('a source that returns no function: only accept Lua function', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/routes/bad', route('local a = 123;'));
    assert.equal(r.status, 400);
    assert.deepEqual(r.json, { error_msg: 'failed to check the configuration of plugin serverless-pre-function err: only accept Lua function, the input code type is nil' });
  });

  it('a source that fails when run: pcall error', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/routes/bad', route('error("boom")'));
    assert.equal(r.status, 400);
    assert.match((r.json as { error_msg: string }).error_msg, /err: pcall error: \[string "error\("boom"\)"\]:1: boom$/);
  });

  it('an unknown phase: the schema\'s enum message; the default phase is access', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/routes/bad', route('return function() end', { phase: 'abc' }));
    assert.equal(r.status, 400);
    assert.deepEqual(r.json, { error_msg: 'failed to check the configuration of plugin serverless-pre-function err: property "phase" validation failed: matches none of the enum values' });
    const ok = await gw.admin('PUT', '/gateway/admin/routes/good', route('return function() end'));
    assert.equal(ok.status, 201);
  });
});

describe('serverless on the request path', () => {
  it('ngx.exit(201) in the pre function answers 201 and logs what the function logged', async () => {
    await put(gw, 'routes/s1', { uri: '/s1', plugins: { 'serverless-pre-function': { functions: ["return function() ngx.log(ngx.ERR, 'serverless pre function'); ngx.exit(201); end"] } }, upstream: up() });
    const r = await untilRouted(gw, '/s1', (x) => x.status === 201);
    assert.equal(r.body, '');
    assert.equal(o.seen.filter((s) => s.url === '/s1').length, 0);
    await untilLogged('serverless pre function');
  });

  it('pre and post together: both run, by priority (pre first), and the post function\'s exit answers', async () => {
    await put(gw, 'routes/s2', { uri: '/s2', plugins: {
      'serverless-pre-function': { functions: ["return function() ngx.log(ngx.ERR, 'pre ran for s2') end"] },
      'serverless-post-function': { functions: ["return function() ngx.log(ngx.ERR, 'post ran for s2'); ngx.exit(202) end"] },
    }, upstream: up() });
    await untilRouted(gw, '/s2', (x) => x.status === 202);
    await untilLogged('post ran for s2');
    const log = errorLog();
    assert.ok(log.lastIndexOf('pre ran for s2') < log.lastIndexOf('post ran for s2'));
  });

  it('a redirect from ngx.header and ngx.exit(301), with ngx.var', async () => {
    const fn = 'return function() if ngx.var.scheme == "http" and ngx.var.host == "foo.com" then ngx.header["Location"] = "https://foo.com" .. ngx.var.request_uri; ngx.exit(ngx.HTTP_MOVED_PERMANENTLY) end end';
    await put(gw, 'routes/s3', { uri: '/s3', plugins: { 'serverless-pre-function': { functions: [fn] } }, upstream: up() });
    const r = await untilRouted(gw, '/s3?a=1', (x) => x.status === 301, { headers: { Host: 'foo.com' } });
    assert.equal(r.headers.location, 'https://foo.com/s3?a=1');
    const other = await proxy(gw, '/s3', { headers: { Host: 'bar.com' } });
    assert.equal(other.status, 200);
    assert.equal(other.echo!.url, '/s3');
  });

  it('conf and ctx: conf.phase, ctx.curr_req_matched._path, and ctx.var.upstream_uri changes the URI proxied', async () => {
    const fn = "return function(conf, ctx) ngx.log(ngx.WARN, 'default phase: ', conf.phase); ngx.log(ngx.WARN, 'match uri ', ctx.curr_req_matched and ctx.curr_req_matched._path); ctx.var.upstream_uri = '/server_port' end";
    await put(gw, 'routes/s4', { uri: '/s4', plugins: { 'serverless-post-function': { functions: [fn] } }, upstream: up() });
    const r = await untilRouted(gw, '/s4', (x) => x.echo?.url === '/server_port');
    assert.equal(r.status, 200);
    await untilLogged('match uri /s4');
    assert.ok(errorLog().includes('default phase: access'));
  });

  it('a function that returns a code and a body ends the request; the next one does not run', async () => {
    await put(gw, 'routes/s5', { uri: '/s5', plugins: { 'serverless-post-function': {
      functions: ["return function(conf, ctx) return 403, 'forbidden' end", "return function() ngx.log(ngx.ERR, 'unreachable s5') end"],
    } }, upstream: up() });
    const r = await untilRouted(gw, '/s5', (x) => x.status === 403);
    assert.equal(r.body, 'forbidden');
    const t = await (async () => { await put(gw, 'routes/s5t', { uri: '/s5t', plugins: { 'serverless-pre-function': { functions: ['return function() return 200, {a = 1} end'] } }, upstream: up() }); return untilRouted(gw, '/s5t', (x) => x.status === 200 && x.echo === undefined); })();
    assert.equal(t.body, '{"a":1}\n');
    assert.ok(!errorLog().includes('unreachable s5'));
  });

  it('ngx.say then ngx.exit(200) answers with the output; ngx.req headers reach the function', async () => {
    const fn = "return function() ngx.say('hi ', ngx.req.get_headers()['x-who'], ' ', ngx.req.get_method()); ngx.exit(200) end";
    await put(gw, 'routes/s6', { uri: '/s6', plugins: { 'serverless-pre-function': { phase: 'rewrite', functions: [fn] } }, upstream: up() });
    const r = await untilRouted(gw, '/s6', (x) => x.body === 'hi me GET\n', { headers: { 'X-Who': 'me' } });
    assert.equal(r.status, 200);
  });

  it('a closure keeps its state between requests; the log phase runs after the answer', async () => {
    await put(gw, 'routes/s7', { uri: '/s7', plugins: { 'serverless-pre-function': { phase: 'log',
      functions: ["local count = 1; return function() count = count + 1; ngx.log(ngx.ERR, 'closure count:', count) end"] } }, upstream: up() });
    await untilRouted(gw, '/s7', (x) => x.status === 200 && x.echo?.url === '/s7');
    await untilLogged('closure count:2');
    await proxy(gw, '/s7');
    await untilLogged('closure count:3');
  });

  it('header_filter sets response headers and ngx.status; body_filter changes the body', async () => {
    await put(gw, 'routes/s8', { uri: '/text', plugins: {
      'serverless-pre-function': { phase: 'header_filter', functions: ["return function() ngx.header['X-Filtered'] = 'yes'; ngx.status = 201 end"] },
      'serverless-post-function': { phase: 'body_filter', functions: ["return function() ngx.arg[1] = string.upper(ngx.arg[1]) end"] },
    }, upstream: up() });
    const r = await untilRouted(gw, '/text', (x) => x.headers['x-filtered'] === 'yes');
    assert.equal(r.status, 201);
    assert.equal(r.body, 'HELLO WORLD\n');
    assert.equal(r.headers['content-length'], undefined);
  });

  it('core.log and core.response.exit from require("apisix.core")', async () => {
    const fn = "return function(conf, ctx) local core = require('apisix.core'); core.log.warn('core log from ', ctx.route_id); return core.response.exit(418, {message = 'teapot'}) end";
    await put(gw, 'routes/s9', { uri: '/s9', plugins: { 'serverless-pre-function': { functions: [fn] } }, upstream: up() });
    const r = await untilRouted(gw, '/s9', (x) => x.status === 418);
    assert.equal(r.body, '{"message":"teapot"}\n');
    await untilLogged('core log from s9');
  });

  it('a function that fails at run time answers 500 and logs the error', async () => {
    await put(gw, 'routes/s10', { uri: '/s10', plugins: { 'serverless-pre-function': { functions: ['return function() local t = nil; return t.x end'] } }, upstream: up() });
    await untilRouted(gw, '/s10', (x) => x.status === 500);
    await untilLogged('lua entry thread aborted: runtime error:');
  });

  it('before_proxy runs after access, in OpenResty\'s access phase', async () => {
    await put(gw, 'routes/s12', { uri: '/s12', plugins: {
      'serverless-pre-function': { phase: 'before_proxy', functions: ["return function() ngx.req.set_header('X-Phase', ngx.get_phase() .. ':' .. (ngx.req.get_headers()['x-access'] or '-')) end"] },
      'serverless-post-function': { phase: 'access', functions: ["return function() ngx.req.set_header('X-Access', 'done') end"] },
    }, upstream: up() });
    const r = await untilRouted(gw, '/s12', (x) => x.echo?.headers['x-phase'] !== undefined);
    assert.equal(r.echo!.headers['x-phase'], 'access:done');
  });

  it('in a global rule the function runs for every request, a 404 too', async () => {
    await put(gw, 'global_rules/g1', { plugins: { 'serverless-post-function': { phase: 'header_filter', functions: ["return function() ngx.header['X-Global'] = ngx.status end"] } } });
    const r = await untilRouted(gw, '/nowhere', (x) => x.headers['x-global'] !== undefined);
    assert.equal(r.status, 404);
    assert.equal(r.headers['x-global'], '404');
    assert.equal(r.body, '{"error_msg":"404 Route Not Found"}\n');
    await gw.admin('DELETE', '/gateway/admin/global_rules/g1');
  });

  it('ngx.sleep in access waits, then the request goes on to the upstream', async () => {
    await put(gw, 'routes/s11', { uri: '/s11', plugins: { 'serverless-pre-function': { functions: ["return function() ngx.sleep(0.01); ngx.req.set_header('X-Slept', 'yes') end"] } }, upstream: up() });
    const r = await untilRouted(gw, '/s11', (x) => x.echo?.headers['x-slept'] === 'yes');
    assert.equal(r.status, 200);
  });
});
