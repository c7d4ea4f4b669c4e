/**
 * The other collections and their rules, from APISIX's tests:
 * t/admin/upstream.t, upstream-force-delete.t, services.t,
 * services-force-delete.t, consumers.t, consumers2.t, credentials.t,
 * global-rules.t, plugin-configs.t, ssl.t, plugins.t, schema.t.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';

let gw: Gateway;
before(async () => { gw = await startGateway(); });
after(async () => { await gw.stop(); });

const upstream = { nodes: { '127.0.0.1:8080': 1 }, type: 'roundrobin' };
const valueOf = (r: { json: unknown }): Record<string, unknown> => (r.json as { value: Record<string, unknown> }).value;

describe('upstreams and services: references', () => {
  it('an upstream used by a route or a service is not deleted unless force=true (upstream-force-delete.t)', async () => {
    assert.equal((await gw.admin('PUT', '/gateway/admin/upstreams/1', upstream)).status, 201);
    assert.equal((await gw.admin('PUT', '/gateway/admin/routes/1', { uri: '/hello', upstream_id: '1' })).status, 201);
    const refused = await gw.admin('DELETE', '/gateway/admin/upstreams/1');
    assert.deepEqual([refused.status, refused.json], [400, { error_msg: 'can not delete this upstream, route [1] is still using it now' }]);
    const notForce = await gw.admin('DELETE', '/gateway/admin/upstreams/1?force=anyvalue');
    assert.equal(notForce.status, 400);
    const forced = await gw.admin('DELETE', '/gateway/admin/upstreams/1?force=true');
    assert.deepEqual([forced.status, forced.json], [200, { deleted: '1', key: '/gateway/upstreams/1' }]);
  });

  it('a service used by a route is not deleted (services-force-delete.t)', async () => {
    assert.equal((await gw.admin('PUT', '/gateway/admin/services/1', { upstream })).status, 201);
    await gw.admin('PUT', '/gateway/admin/routes/1', { uri: '/hello', service_id: 1 });
    const refused = await gw.admin('DELETE', '/gateway/admin/services/1');
    assert.deepEqual(refused.json, { error_msg: 'can not delete this service directly, route [1] is still using it now' });
    await gw.admin('DELETE', '/gateway/admin/routes/1');
    assert.equal((await gw.admin('DELETE', '/gateway/admin/services/1')).status, 200);
  });

  it('upstream checks: a port out of range, an unbracketed IPv6 node, a chash key pattern (upstream.t, upstream-array-nodes.t)', async () => {
    const port = await gw.admin('PUT', '/gateway/admin/upstreams/2', { nodes: { '127.0.0.1:65536': 1 }, type: 'roundrobin' });
    assert.deepEqual(port.json, { error_msg: 'invalid port 65536' });
    const v6 = await gw.admin('PUT', '/gateway/admin/upstreams/2', { nodes: [{ host: '::1', port: 80, weight: 1 }], type: 'roundrobin' });
    assert.deepEqual(v6.json, { error_msg: "invalid configuration: IPv6 address must be enclosed with '[' and ']'" });
    const key = await gw.admin('PUT', '/gateway/admin/upstreams/2', { nodes: { '127.0.0.1:80': 1 }, type: 'chash', hash_on: 'header', key: '$uri' });
    assert.deepEqual(key.json, { error_msg: 'invalid configuration: failed to match pattern "^[a-zA-Z0-9-_]+$" with "$uri"' });
  });
});

describe('consumers and credentials', () => {
  it('the username is the identity: no id in the value; a different URL name is refused (consumers.t, consumers2.t)', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/consumers', { username: 'jack', desc: 'new consumer' });
    assert.equal(r.status, 201);
    assert.equal((r.json as { key: string }).key, '/gateway/consumers/jack');
    const { create_time: _c, update_time: _u, ...v } = valueOf(r);
    assert.deepEqual(v, { username: 'jack', desc: 'new consumer' });
    const wrong = await gw.admin('PUT', '/gateway/admin/consumers/jim', { username: 'jack' });
    assert.deepEqual([wrong.status, wrong.json], [400, { error_msg: 'wrong username' }]);
    const post = await gw.admin('POST', '/gateway/admin/consumers', { username: 'x' });
    assert.deepEqual([post.status, post.json], [405, { error_msg: 'not supported `POST` method for consumer' }]);
    const none = await gw.admin('PUT', '/gateway/admin/consumers', { desc: 'x' });
    assert.deepEqual(none.json, { error_msg: 'invalid configuration: property "username" is required' });
  });

  it('plugin confs are checked with the consumer schema; an auth key belongs to one consumer (consumers.t)', async () => {
    const bad = await gw.admin('PUT', '/gateway/admin/consumers', { username: 'jack', plugins: { 'key-auth': {} } });
    assert.deepEqual(bad.json, { error_msg: 'invalid plugins configuration: failed to check the configuration of plugin key-auth err: property "key" is required' });
    assert.equal((await gw.admin('PUT', '/gateway/admin/consumers', { username: 'case_a', plugins: { 'key-auth': { key: 'auth-one' } } })).status, 201);
    const dup = await gw.admin('PUT', '/gateway/admin/consumers', { username: 'case_b', plugins: { 'key-auth': { key: 'auth-one' } } });
    assert.deepEqual([dup.status, dup.json], [400, { error_msg: 'duplicate key of plugin key-auth found with consumer: case_a' }]);
  });

  it('auth secrets are stored encrypted with the keyring: PUT answers the ciphertext, GET the plain text (consumers.t, credentials.t)', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/consumers', { username: 'enc', plugins: { 'key-auth': { key: 'auth-one-enc' }, 'basic-auth': { username: 'u-enc', password: 'the-password' } } });
    assert.equal(r.status, 201);
    const sent = valueOf(r).plugins as Record<string, Record<string, string>>;
    assert.equal(sent['basic-auth'].password, 'WvF5kpaLvIzjuk4GNIMTJg=='); // APISIX's ciphertext for the default keyring
    assert.notEqual(sent['key-auth'].key, 'auth-one-enc');
    assert.equal(sent['basic-auth'].username, 'u-enc');
    const got = valueOf(await gw.admin('GET', '/gateway/admin/consumers/enc')).plugins as Record<string, Record<string, string>>;
    assert.deepEqual(got, { 'key-auth': { key: 'auth-one-enc' }, 'basic-auth': { username: 'u-enc', password: 'the-password' } });
    const dup = await gw.admin('PUT', '/gateway/admin/consumers', { username: 'enc2', plugins: { 'key-auth': { key: 'auth-one-enc' } } });
    assert.deepEqual(dup.json, { error_msg: 'duplicate key of plugin key-auth found with consumer: enc' });
  });

  it('credentials need their consumer, take one auth plugin, list 404 when none, go with the consumer (credentials.t)', async () => {
    const orphan = await gw.admin('PUT', '/gateway/admin/consumers/nobody/credentials/c1', { plugins: { 'key-auth': { key: 'k1' } } });
    assert.deepEqual([orphan.status, orphan.json], [404, { error_msg: 'consumer not found' }]);
    const empty = await gw.admin('GET', '/gateway/admin/consumers/jack/credentials');
    assert.deepEqual([empty.status, empty.json], [404, { message: 'Key not found' }]);
    const two = await gw.admin('PUT', '/gateway/admin/consumers/jack/credentials/c1', { plugins: { 'key-auth': { key: 'k1' }, 'basic-auth': { username: 'u', password: 'p' } } });
    assert.deepEqual(two.json, { error_msg: 'invalid configuration: property "plugins" validation failed: expect object to have at most 1 properties' });
    const notAuth = await gw.admin('PUT', '/gateway/admin/consumers/jack/credentials/c1', { plugins: { gzip: {} } });
    assert.deepEqual(notAuth.json, { error_msg: 'only supports auth type plugins in consumer credential' });
    const ok = await gw.admin('PUT', '/gateway/admin/consumers/jack/credentials/c1', { plugins: { 'key-auth': { key: 'k1' } } });
    assert.deepEqual([ok.status, (ok.json as { key: string }).key], [201, '/gateway/consumers/jack/credentials/c1']);
    const list = await gw.admin('GET', '/gateway/admin/consumers/jack/credentials');
    assert.equal((list.json as { total: number }).total, 1);
    const consumers = await gw.admin('GET', '/gateway/admin/consumers');
    assert.deepEqual((consumers.json as { list: Array<{ key: string }> }).list.map((x) => x.key), ['/gateway/consumers/case_a', '/gateway/consumers/enc', '/gateway/consumers/jack']);
    assert.equal((await gw.admin('DELETE', '/gateway/admin/consumers/jack')).status, 200);
    const gone = await gw.admin('GET', '/gateway/admin/consumers/jack/credentials/c1');
    assert.equal(gone.status, 404);
  });
});

describe('global rules, plugin configs, ssls', () => {
  it('global rules need plugins, refuse POST, and a plugin may be in one rule only (global-rules.t, global-rules-conflict.t)', async () => {
    const missing = await gw.admin('PUT', '/gateway/admin/global_rules/1', {});
    assert.deepEqual(missing.json, { error_msg: 'invalid configuration: property "plugins" is required' });
    const post = await gw.admin('POST', '/gateway/admin/global_rules', { plugins: {} });
    assert.deepEqual([post.status, post.json], [405, { error_msg: 'not supported `POST` method for global rule' }]);
    assert.equal((await gw.admin('PUT', '/gateway/admin/global_rules/1', { plugins: { 'limit-count': { count: 2, time_window: 60 } } })).status, 201);
    const clash = await gw.admin('PUT', '/gateway/admin/global_rules/2', { plugins: { 'limit-count': { count: 3, time_window: 60 } } });
    assert.deepEqual(clash.json, { error_msg: "plugin 'limit-count' already exists in global rule with id '1'" });
    const unknown = await gw.admin('PUT', '/gateway/admin/global_rules/3', { plugins: { 'no-such-plugin': {} } });
    assert.deepEqual(unknown.json, { error_msg: 'unknown plugin [no-such-plugin]' });
    const bad = await gw.admin('PUT', '/gateway/admin/global_rules/3', { plugins: { gzip: { comp_level: 10 } } });
    assert.deepEqual(bad.json, { error_msg: 'failed to check the configuration of plugin gzip err: property "comp_level" validation failed: expected 10 to be at most 9' });
  });

  it('a plugin config used by a route is not deleted (plugin-configs.t)', async () => {
    assert.equal((await gw.admin('PUT', '/gateway/admin/plugin_configs/1', { plugins: {} })).status, 201);
    await gw.admin('PUT', '/gateway/admin/routes/pc', { uri: '/pc', plugin_config_id: 1, upstream });
    const r = await gw.admin('DELETE', '/gateway/admin/plugin_configs/1');
    assert.deepEqual(r.json, { error_msg: 'can not delete this plugin config, route [pc] is still using it now' });
  });

  it('an ssl needs sni, cert and key; GET never returns the key (ssl.t, ssl2.t)', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/ssls/1', { sni: 'test.com' });
    assert.deepEqual(r.json, { error_msg: 'invalid configuration: then clause did not match' });
  });
});

describe('ssls with a real certificate', () => {
  it('stores the private key encrypted, never returns it on GET, refuses an unparsable certificate (ssl.t, ssl2.t)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-gwssl-'));
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=test.com', '-days', '1',
      '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem')], { stdio: 'ignore' });
    const cert = fs.readFileSync(path.join(dir, 'cert.pem'), 'utf8');
    const key = fs.readFileSync(path.join(dir, 'key.pem'), 'utf8');
    const r = await gw.admin('PUT', '/gateway/admin/ssls/1', { cert, key, sni: 'test.com' });
    assert.equal(r.status, 201);
    const stored = valueOf(r).key as string;
    assert.ok(!stored.startsWith('---') && stored.length > 0);
    const got = valueOf(await gw.admin('GET', '/gateway/admin/ssls/1'));
    assert.equal(got.key, undefined);
    assert.deepEqual([got.cert, got.sni], [cert, 'test.com']);
    const listed = (await gw.admin('GET', '/gateway/admin/ssls')).json as { list: Array<{ value: Record<string, unknown> }> };
    assert.equal(listed.list[0].value.key, undefined);
    const bad = await gw.admin('PUT', '/gateway/admin/ssls/2', { cert: 'x'.repeat(200), key, sni: 'test.com' });
    assert.equal(bad.status, 400);
    assert.match((bad.json as { error_msg: string }).error_msg, /^failed to parse cert: /);
  });
});

describe('plugins and schemas', () => {
  it('/plugins/list names plugins by priority; /plugins/{name} gives the schema with _meta (plugins.t)', async () => {
    const list = await gw.admin('GET', '/gateway/admin/plugins/list');
    const names = list.json as string[];
    assert.ok(names.indexOf('basic-auth') < names.indexOf('key-auth'));
    const one = await gw.admin('GET', '/gateway/admin/plugins/key-auth');
    const schema = one.json as { properties: Record<string, unknown>; $comment: string };
    assert.equal(schema.$comment, 'this is a mark for our injected plugin schema');
    assert.ok('_meta' in schema.properties && 'header' in schema.properties);
    const consumer = await gw.admin('GET', '/gateway/admin/plugins/key-auth?schema_type=consumer');
    assert.deepEqual((consumer.json as { required: string[] }).required, ['key']);
    const none = await gw.admin('GET', '/gateway/admin/plugins/no-such');
    assert.deepEqual([none.status, none.json], [404, { error_msg: 'plugin not found in subsystem http' }]);
    const sub = await gw.admin('GET', '/gateway/admin/plugins/list?subsystem=nope');
    assert.deepEqual([sub.status, sub.text], [400, 'invalid subsystem passed']);
    const reload = await gw.admin('GET', '/gateway/admin/plugins/reload');
    assert.deepEqual([reload.status, reload.json], [405, { error_msg: 'please use PUT method to reload the plugins, GET method is not allowed.' }]);
  });

  it('/schema/{resource} and /schema/validate/{collection} (schema.t, schema-validate.t)', async () => {
    const route = await gw.admin('GET', '/gateway/admin/schema/route');
    assert.equal((route.json as { type: string }).type, 'object');
    const unknown = await gw.admin('GET', '/gateway/admin/schema/nope');
    assert.deepEqual([unknown.status, unknown.json], [400, { error_msg: 'not found schema: nope' }]);
    const invalid = await gw.admin('POST', '/gateway/admin/schema/validate/routes', { uri: '/x', methods: ['NOPE'], upstream });
    assert.deepEqual([invalid.status, invalid.json], [400, { error_msg: 'property "methods" validation failed: failed to validate item 1: matches none of the enum values' }]);
    const valid = await gw.admin('POST', '/gateway/admin/schema/validate/routes', { uri: '/x', upstream });
    assert.equal(valid.status, 200);
  });
});
