/**
 * The smaller collections (t/admin/plugin-metadata.t, consumer-group.t,
 * protos.t, secrets.t, stream-routes.t with proxy_mode http&stream).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ADMIN_KEY, startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';

let gw: Gateway;
before(async () => {
  gw = await startGateway({
    yaml: `apisix:
  node_listen: [{ip: 127.0.0.1, port: %PROXY%}]
  proxy_mode: http&stream
nginx_config:
  worker_processes: 1
deployment:
  admin:
    admin_listen: {ip: 127.0.0.1, port: %ADMIN%}
    admin_key: [{name: admin, key: ${ADMIN_KEY}, role: admin}]
`,
  });
});
after(async () => { await gw.stop(); });

const valueOf = (r: { json: unknown }): Record<string, unknown> => (r.json as { value: Record<string, unknown> }).value;

describe('smaller collections', () => {
  it('plugin_metadata is keyed by plugin name, stores the name as id, refuses unknown plugins and POST (plugin-metadata.t)', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/plugin_metadata/key-auth', { a: 1 });
    assert.deepEqual([r.status, r.json], [201, { key: '/gateway/plugin_metadata/key-auth', value: { a: 1, id: 'key-auth' } }]);
    const unknown = await gw.admin('PUT', '/gateway/admin/plugin_metadata/no-such', { a: 1 });
    assert.deepEqual([unknown.status, unknown.json], [400, { error_msg: 'invalid plugin name' }]);
    const post = await gw.admin('POST', '/gateway/admin/plugin_metadata', { a: 1 });
    assert.equal(post.status, 405);
  });

  it('a consumer group in use by a consumer is not deleted (consumer-group.t)', async () => {
    assert.equal((await gw.admin('PUT', '/gateway/admin/consumer_groups/company_a', { plugins: {} })).status, 201);
    const missing = await gw.admin('PUT', '/gateway/admin/consumers', { username: 'foo', group_id: 'nope' });
    assert.deepEqual(missing.json, { error_msg: 'failed to fetch consumer group info by consumer group id [nope], response code: 404' });
    assert.equal((await gw.admin('PUT', '/gateway/admin/consumers', { username: 'foo', group_id: 'company_a' })).status, 201);
    const del = await gw.admin('DELETE', '/gateway/admin/consumer_groups/company_a');
    assert.deepEqual([del.status, del.json], [400, { error_msg: 'can not delete this consumer group, consumer [foo] is still using it now' }]);
  });

  it('protos need content and refuse PATCH (protos.t)', async () => {
    const r = await gw.admin('POST', '/gateway/admin/protos', { content: 'syntax = "proto3";' });
    assert.equal(r.status, 201);
    const missing = await gw.admin('PUT', '/gateway/admin/protos/1', {});
    assert.deepEqual(missing.json, { error_msg: 'invalid configuration: property "content" is required' });
    const patch = await gw.admin('PATCH', '/gateway/admin/protos/1', {});
    assert.deepEqual([patch.status, patch.json], [405, { error_msg: 'not supported `PATCH` method for proto' }]);
  });

  it("a proto's content must compile: .proto text or a base64 descriptor set; else 400 and nothing stored (protos.t)", async () => {
    const text = 'syntax = "proto3";\npackage hello;\nservice Greeter { rpc Say (Req) returns (Rep) {} }\n'
      + 'message Req { string name = 1; }\nmessage Rep { int32 code = 1; string msg = 2; }';
    assert.equal((await gw.admin('PUT', '/gateway/admin/protos/p1', { content: text })).status, 201);
    const clash = await gw.admin('PUT', '/gateway/admin/protos/p2', { content: text.replace('msg = 2', 'msg = 1') });
    assert.equal(clash.status, 400);
    assert.match((clash.json as { error_msg: string }).error_msg, /^invalid content: .*duplicate id 1/);
    const unknownType = await gw.admin('PUT', '/gateway/admin/protos/p2', { content: text.replace('string name', 'strng name') });
    assert.match((unknownType.json as { error_msg: string }).error_msg, /^invalid content: /);
    assert.equal((await gw.admin('GET', '/gateway/admin/protos/p2')).status, 404);
    // the same file as `protoc --descriptor_set_out` writes it (base64): accepted as APISIX accepts it
    const set = 'CpwBChBoZWxsb3dvcmxkLnByb3RvEgpoZWxsb3dvcmxkIiAKDEhlbGxvUmVxdWVzdBIQCgRuYW1lGAEgASgJQgIQACIhCgpIZWxsb1JlcGx5EhMKB21lc3NhZ2UYASABKAlCAhAAMi8KB0dyZWV0ZXISJAoIU2F5SGVsbG8SDEhlbGxvUmVxdWVzdBoKSGVsbG9SZXBseWIGcHJvdG8z';
    assert.equal((await gw.admin('PUT', '/gateway/admin/protos/p3', { content: set })).status, 201);
    assert.equal((await gw.admin('PUT', '/gateway/admin/protos/p4', { content: 'bm90IGEgcHJvdG8=' })).status, 400);
  });

  it('secrets live under their manager with the id `manager/id` (secrets.t)', async () => {
    const body = { uri: 'http://127.0.0.1:12800', prefix: 'kv/apisix', token: 'root' };
    const r = await gw.admin('PUT', '/gateway/admin/secrets/vault/test1', body);
    assert.equal(r.status, 201);
    assert.equal((r.json as { key: string }).key, '/gateway/secrets/vault/test1');
    assert.equal(valueOf(r).id, 'vault/test1');
    const got = await gw.admin('GET', '/gateway/admin/secrets/vault/test1');
    assert.equal(got.status, 200);
    const bad = await gw.admin('PUT', '/gateway/admin/secrets/vault/test2', { uri: 'http://127.0.0.1:12800', prefix: 'kv' });
    assert.deepEqual(bad.json, { error_msg: 'invalid configuration: property "token" is required' });
  });

  it('stream routes with stream mode on: CRUD, and no PATCH (stream-routes.t)', async () => {
    const r = await gw.admin('PUT', '/gateway/admin/stream_routes/1', { remote_addr: '127.0.0.1', upstream: { nodes: { '127.0.0.1:8080': 1 }, type: 'roundrobin' } });
    assert.equal(r.status, 201);
    const bad = await gw.admin('PUT', '/gateway/admin/stream_routes/1', { server_port: 70000 });
    assert.deepEqual(bad.json, { error_msg: 'invalid configuration: property "server_port" validation failed: expected 70000 to be at most 65535' });
    const patch = await gw.admin('PATCH', '/gateway/admin/stream_routes/1', {});
    assert.deepEqual([patch.status, patch.json], [405, { error_msg: 'not supported `PATCH` method for stream route' }]);
  });
});
