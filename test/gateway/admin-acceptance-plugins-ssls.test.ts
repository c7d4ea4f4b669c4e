/**
 * Admin API answers taken from APISIX's t/admin tests (plugins.t,
 * plugin-metadata.t, ssl.t, ssl2.t, health-check.t): plugin views and
 * schemas, SSL objects written, patched and refused, with the embedded
 * store and with etcd.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { etcdSkip, etcdYaml, startEtcd } from './etcd-kit.ts';
import type { Etcd } from './etcd-kit.ts';
import { defaultYaml, startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';

function selfSigned(cn: string): { cert: string; key: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-acc-ssl-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${cn}`, '-days', '1',
    '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem')], { stdio: 'ignore' });
  return { cert: fs.readFileSync(path.join(dir, 'cert.pem'), 'utf8'), key: fs.readFileSync(path.join(dir, 'key.pem'), 'utf8') };
}

for (const store of ['embedded', 'etcd'] as const) {
  describe(`plugins and ssls (${store} store)`, { skip: store === 'etcd' ? etcdSkip : false }, () => {
    let gw: Gateway;
    let etcd: Etcd | undefined;
    const pem = selfSigned('test.com');
    before(async () => {
      if (store === 'etcd') etcd = await startEtcd();
      gw = await startGateway({ yaml: etcd ? etcdYaml(etcd.url, 1) : defaultYaml(1) });
    });
    after(async () => {
      await gw?.stop();
      await etcd?.destroy();
    });

    it('/plugins?all=true gives example-plugin its schema with _meta injected, and its metadata schema', async () => {
      const all = (await gw.admin('GET', '/gateway/admin/plugins?all=true')).json as Record<string, Record<string, unknown>>;
      const ex = all['example-plugin'];
      assert.equal(ex.priority, 0);
      assert.equal(ex.version, 0.1);
      assert.deepEqual(ex.metadata_schema, { type: 'object', properties: { ikey: { type: 'number', minimum: 0 }, skey: { type: 'string' } }, required: ['ikey', 'skey'] });
      const schema = ex.schema as { $comment: string; properties: Record<string, { properties?: Record<string, { description?: string }> }> };
      assert.equal(schema.$comment, 'this is a mark for our injected plugin schema');
      assert.equal(schema.properties._meta.properties!.priority.description, 'priority of plugins by customized order');
    });

    it('basic-auth: the route schema\'s title, the consumer schema with its encrypt_fields', async () => {
      const route = await gw.admin('GET', '/gateway/admin/plugins/basic-auth');
      assert.equal((route.json as { title: string }).title, 'work with route or service object');
      const consumer = await gw.admin('GET', '/gateway/admin/plugins/basic-auth?schema_type=consumer');
      assert.deepEqual(consumer.json, {
        type: 'object', title: 'work with consumer object',
        properties: { username: { type: 'string' }, password: { type: 'string' } },
        required: ['username', 'password'], encrypt_fields: ['password'],
      });
    });

    it('a duplicate in a health check\'s http_statuses names the first pair in order', async () => {
      const r = await gw.admin('PUT', '/gateway/admin/routes/1', {
        uri: '/index.html',
        upstream: { type: 'roundrobin', nodes: { '127.0.0.1:8080': 1 }, checks: { active: { healthy: { http_statuses: [200, 200] } } } },
      });
      assert.deepEqual([r.status, r.json], [400, {
        error_msg: 'invalid configuration: property "upstream" validation failed: property "checks" validation failed: property "active" validation failed: property "healthy" validation failed: property "http_statuses" validation failed: expected unique items but items 1 and 2 are equal',
      }]);
    });

    it('an ssl is patched (a sub-path and a merge) with its stored, encrypted key', async () => {
      assert.equal((await gw.admin('PUT', '/gateway/admin/ssls/1', { ...pem, snis: ['test.com'] })).status, 201);
      const sub = await gw.admin('PATCH', '/gateway/admin/ssls/1/snis', ['update1.com', 'update2.com']);
      assert.equal(sub.status, 200, sub.text);
      assert.deepEqual((sub.json as { value: { snis: string[] } }).value.snis, ['update1.com', 'update2.com']);
      const merge = await gw.admin('PATCH', '/gateway/admin/ssls/1', { labels: { env: 'test' } });
      assert.equal(merge.status, 200, merge.text);
      const got = (await gw.admin('GET', '/gateway/admin/ssls/1')).json as { value: Record<string, unknown> };
      assert.deepEqual([got.value.labels, got.value.key], [{ env: 'test' }, undefined]);
    });

    it('an unparsable certificate or key names the OpenSSL call as APISIX does', async () => {
      const badCert = await gw.admin('PUT', '/gateway/admin/ssls/2', { cert: 'x'.repeat(200), key: pem.key, sni: 'test.com' });
      assert.deepEqual([badCert.status, badCert.json], [400, { error_msg: 'failed to parse cert: PEM_read_bio_X509_AUX() failed' }]);
      const badKey = await gw.admin('PUT', '/gateway/admin/ssls/2', { cert: pem.cert, key: 'y'.repeat(100), sni: 'test.com' });
      assert.deepEqual([badKey.status, badKey.json], [400, { error_msg: 'failed to parse key: PEM_read_bio_PrivateKey() failed' }]);
      const pair = await gw.admin('PUT', '/gateway/admin/ssls/2', { ...pem, sni: 'test.com', certs: [pem.cert], keys: ['y'.repeat(100)] });
      assert.deepEqual([pair.status, pair.json], [400, { error_msg: 'failed to handle cert-key pair[1]: failed to parse key: PEM_read_bio_PrivateKey() failed' }]);
    });
  });
}
