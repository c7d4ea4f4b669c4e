/**
 * Plugins the gateway knows by their schemas only (ldap-auth,
 * ldap-auth-advanced, grpc-transcode, node-status): the Admin API
 * takes a good conf, refuses a bad one with APISIX's message and keeps what
 * was stored, and the data plane refuses a request that would run one
 * instead of passing it on unchecked. The loggers' Admin API checks are
 * here too (what they send: dataplane-loggers.test.ts), and csrf's (what it
 * does: dataplane-csrf.test.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { untilRouted } from './dataplane-kit.ts';

const upstream = { type: 'roundrobin', nodes: { '127.0.0.1:1980': 1 } };
const route = (plugins: Record<string, unknown>, uri = '/only-schema') => ({ uri, upstream, plugins });

describe('plugins known by their schemas only', () => {
  let gw: Gateway;
  before(async () => { gw = await startGateway(); });
  after(async () => { await gw.stop(); });

  it('lists them and serves their schemas', async () => {
    const list = await gw.admin('GET', '/gateway/admin/plugins/list');
    for (const name of ['ldap-auth', 'ldap-auth-advanced', 'csrf', 'grpc-transcode', 'http-logger', 'udp-logger', 'node-status']) {
      assert.ok((list.json as string[]).includes(name), name);
    }
    const names = list.json as string[];
    // by priority, highest first: csrf 2980, ldap-auth-advanced 2541, ldap-auth 2540, node-status 1000, grpc-transcode 506, http-logger 410, udp-logger 400
    const order = ['csrf', 'ldap-auth-advanced', 'ldap-auth', 'node-status', 'grpc-transcode', 'http-logger', 'udp-logger'].map((n) => names.indexOf(n));
    assert.deepEqual(order, [...order].sort((a, b) => a - b));
    const grpc = await gw.admin('GET', '/gateway/admin/schema/plugins/grpc-transcode');
    assert.equal(grpc.status, 200);
    assert.match(grpc.text, /"proto_id".*additionalProperties/);
    const meta = await gw.admin('GET', '/gateway/admin/plugins/http-logger?schema_type=metadata');
    assert.equal(meta.status, 200);
    const ldap = await gw.admin('GET', '/gateway/admin/plugins/ldap-auth?schema_type=consumer');
    assert.deepEqual((ldap.json as { required: string[] }).required, ['user_dn']);
  });

  it('takes good confs on routes and consumers', async () => {
    const good: Array<Record<string, unknown>> = [
      { 'http-logger': { uri: 'http://127.0.0.1:1980/log', batch_max_size: 1 } },
      { 'udp-logger': { host: '127.0.0.1', port: 514 } },
      { 'grpc-transcode': { proto_id: '1', service: 'helloworld.Greeter', method: 'SayHello', pb_option: ['int64_as_string'] } },
      { 'ldap-auth': { base_dn: 'ou=users,dc=example,dc=org', ldap_uri: 'localhost:1389' } },
      { 'ldap-auth-advanced': { base_dn: 'ou=users,dc=example,dc=org', ldap_uri: 'localhost:1389', attribute: 'sAMAccountName' } },
      { 'node-status': {} },
    ];
    for (const plugins of good) {
      const r = await gw.admin('PUT', '/gateway/admin/routes/good', route(plugins));
      assert.ok(r.status === 200 || r.status === 201, `${r.status} ${r.text}`);
      assert.deepEqual((r.json as { value: { plugins: unknown } }).value.plugins, plugins);
    }
    const c = await gw.admin('PUT', '/gateway/admin/consumers', { username: 'ldap_a', plugins: { 'ldap-auth': { user_dn: 'cn=a,ou=users,dc=example,dc=org' } } });
    assert.equal(c.status, 201, c.text);
  });

  it('refuses bad confs with APISIX\'s messages and keeps the stored object', async () => {
    const kept = route({ 'udp-logger': { host: '127.0.0.1', port: 514 } }, '/kept');
    assert.equal((await gw.admin('PUT', '/gateway/admin/routes/kept', kept)).status, 201);
    const bad: Array<[Record<string, unknown>, string]> = [
      // the pattern quoted as lua-resty-jsonschema quotes it (%q: each backslash doubled)
      [{ 'http-logger': { uri: 'not a uri' } },
        'failed to check the configuration of plugin http-logger err: property "uri" validation failed: failed to match pattern "^[^\\\\/]+:\\\\/\\\\/([\\\\da-zA-Z.-]+|\\\\[[\\\\da-fA-F:]+\\\\])(:\\\\d+)?" with "not a uri"'],
      [{ 'udp-logger': { host: '127.0.0.1' } }, 'failed to check the configuration of plugin udp-logger err: property "port" is required'],
      [{ 'grpc-transcode': { proto_id: '1', service: 's', method: 'm', pb_option: ['bogus'] } },
        'failed to check the configuration of plugin grpc-transcode err: property "pb_option" validation failed: failed to validate item 1: object matches none of the required'],
      [{ csrf: { expires: 10 } }, 'failed to check the configuration of plugin csrf err: property "key" is required'],
      [{ 'ldap-auth': { base_dn: 'ou=users,dc=example,dc=org' } }, 'failed to check the configuration of plugin ldap-auth err: property "ldap_uri" is required'],
    ];
    for (const [plugins, message] of bad) {
      const r = await gw.admin('PUT', '/gateway/admin/routes/kept', route(plugins, '/changed'));
      assert.equal(r.status, 400, JSON.stringify(plugins));
      assert.deepEqual(r.json, { error_msg: message });
    }
    const now = await gw.admin('GET', '/gateway/admin/routes/kept');
    assert.deepEqual((now.json as { value: { plugins: unknown; uri: string } }).value.plugins, kept.plugins);
    assert.equal((now.json as { value: { uri: string } }).value.uri, '/kept');

    const consumer = await gw.admin('PUT', '/gateway/admin/consumers', { username: 'adv_b', plugins: { 'ldap-auth-advanced': { user_dn: '' } } });
    assert.equal(consumer.status, 400);
    assert.deepEqual(consumer.json, { error_msg: 'invalid plugins configuration: failed to check the configuration of plugin ldap-auth-advanced err: property "user_dn" validation failed: string too short, expected at least 1, got 0' });
    assert.equal((await gw.admin('GET', '/gateway/admin/consumers/adv_b')).status, 404);

    const meta = await gw.admin('PUT', '/gateway/admin/plugin_metadata/http-logger', { max_pending_entries: 0 });
    assert.equal(meta.status, 400);
    assert.deepEqual(meta.json, { error_msg: 'invalid configuration: property "max_pending_entries" validation failed: expected 0 to be at least 1' });
    assert.equal((await gw.admin('GET', '/gateway/admin/plugin_metadata/http-logger')).status, 404);
  });

  it('refuses a second consumer with the same ldap-auth user_dn', async () => {
    const dn = 'cn=twice,ou=users,dc=example,dc=org';
    assert.equal((await gw.admin('PUT', '/gateway/admin/consumers', { username: 'dn_first', plugins: { 'ldap-auth': { user_dn: dn } } })).status, 201);
    const r = await gw.admin('PUT', '/gateway/admin/consumers', { username: 'dn_second', plugins: { 'ldap-auth': { user_dn: dn } } });
    assert.equal(r.status, 400);
    assert.deepEqual(r.json, { error_msg: 'duplicate user_dn of plugin ldap-auth found with consumer: dn_first' });
    assert.equal((await gw.admin('GET', '/gateway/admin/consumers/dn_second')).status, 404);
  });

  it('stores csrf\'s key encrypted and shows it in clear on GET', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/routes/csrf', route({ csrf: { key: 'userkey', expires: 1000000000 } }, '/csrf'));
    assert.equal(r.status, 201, r.text);
    const stored = (r.json as { value: { plugins: { csrf: { key: string } } } }).value.plugins.csrf.key;
    assert.notEqual(stored, 'userkey');
    const got = await gw.admin('GET', '/gateway/admin/routes/csrf');
    assert.equal((got.json as { value: { plugins: { csrf: { key: string } } } }).value.plugins.csrf.key, 'userkey');
  });

  it('the data plane refuses a request that would run one, and says why', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/routes/ldap', route({ 'ldap-auth': { base_dn: 'ou=users,dc=example,dc=org', ldap_uri: 'localhost:1389' } }, '/ldap'));
    assert.equal(r.status, 201, r.text);
    const answer = await untilRouted(gw, '/ldap', (x) => x.status !== 404);
    assert.equal(answer.status, 500);
    assert.deepEqual(JSON.parse(answer.body), { error_msg: 'plugin ldap-auth is not implemented by this gateway (its configuration is accepted by the Admin API only)' });
  });
});

describe('cors allow_credential with a * option', () => {
  let gw: Gateway;
  before(async () => { gw = await startGateway(); });
  after(async () => { await gw.stop(); });

  it('is refused as APISIX refuses it (the defaults count), and an explicit list is taken', async () => {
    const message = "failed to check the configuration of plugin cors err: you can not set '*' for other option when 'allow_credential' is true";
    for (const conf of [{ allow_credential: true }, { allow_credential: true, allow_origins: 'http://a.test', allow_methods: 'GET', allow_headers: 'x-a', timing_allow_origins: '*' }]) {
      const r = await gw.admin('PUT', '/gateway/admin/routes/cors', route({ cors: conf }, '/cors'));
      assert.equal(r.status, 400, JSON.stringify(conf));
      assert.deepEqual(r.json, { error_msg: message });
    }
    assert.equal((await gw.admin('GET', '/gateway/admin/routes/cors')).status, 404);
    const ok = await gw.admin('PUT', '/gateway/admin/routes/cors', route({ cors: { allow_credential: true, allow_origins: 'http://a.test', allow_methods: 'GET', allow_headers: 'x-a' } }, '/cors'));
    assert.equal(ok.status, 201, ok.text);
    // the schema is APISIX's: no if/then of our own
    const schema = await gw.admin('GET', '/gateway/admin/plugins/cors');
    assert.equal((schema.json as { then?: unknown }).then, undefined);
  });
});
