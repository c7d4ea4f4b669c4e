/**
 * Who may use the Admin API, as APISIX decides it (t/admin/token.t,
 * t/admin/api.t): the token from `api_key`, `X-API-KEY` or the `x_api_key`
 * cookie, the viewer role, admin CORS, `HEAD /gateway/admin`, and the
 * `allow_admin` address list (nginx's own 403 page).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ADMIN_KEY, VIEWER_KEY, startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';

let gw: Gateway;
before(async () => { gw = await startGateway(); });
after(async () => { await gw.stop(); });

const route = { uri: '/hello', upstream: { nodes: { '127.0.0.1:1980': 1 }, type: 'roundrobin' } };

describe('the admin token', () => {
  it('no token: 401 with APISIX\'s body, no X-API-VERSION, CORS and Server headers present (token.t, api.t)', async () => {
    const r = await gw.admin('GET', '/gateway/admin/routes', undefined, {});
    assert.equal(r.status, 401);
    assert.equal(r.text, '{"error_msg":"failed to check token","description":"missing apikey"}\n');
    assert.equal(r.headers.get('content-type'), 'application/json');
    assert.equal(r.headers.get('x-api-version'), null);
    assert.equal(r.headers.get('access-control-allow-origin'), '*');
    assert.match(r.headers.get('server') ?? '', /^APISIX\//);
  });

  it('a wrong key: 401 wrong apikey; a wrong api_key query wins over a right header (token.t)', async () => {
    const r = await gw.admin('GET', '/gateway/admin/routes', undefined, { 'X-API-KEY': 'nope' });
    assert.deepEqual([r.status, r.json], [401, { error_msg: 'failed to check token', description: 'wrong apikey' }]);
    const q = await gw.admin('GET', '/gateway/admin/routes?api_key=nope', undefined, { 'X-API-KEY': ADMIN_KEY });
    assert.deepEqual([q.status, q.json], [401, { error_msg: 'failed to check token', description: 'wrong apikey' }]);
  });

  it('the key from the query or from the x_api_key cookie (token.t)', async () => {
    const q = await gw.admin('PUT', `/gateway/admin/routes/1?api_key=${ADMIN_KEY}`, route, {});
    assert.equal(q.status, 201);
    const c = await gw.admin('GET', '/gateway/admin/routes/1', undefined, { Cookie: `other=1; x_api_key=${ADMIN_KEY}` });
    assert.equal(c.status, 200);
  });

  it('the viewer role reads and may not write (token.t)', async () => {
    const get = await gw.admin('GET', '/gateway/admin/routes/1', undefined, { 'X-API-KEY': VIEWER_KEY });
    assert.equal(get.status, 200);
    for (const method of ['PUT', 'POST', 'PATCH', 'DELETE']) {
      const w = await gw.admin(method, '/gateway/admin/routes/1', route, { 'X-API-KEY': VIEWER_KEY });
      assert.deepEqual([method, w.status, w.json], [method, 401, { error_msg: 'failed to check token', description: 'invalid method for role viewer' }]);
    }
    const still = await gw.admin('GET', '/gateway/admin/routes/1');
    assert.equal(still.status, 200);
  });
});

describe('admin CORS and HEAD', () => {
  it('OPTIONS is 200, empty, text/plain (with the http block\'s charset, as APISIX\'s admin server), with the allow headers, without a token (api.t)', async () => {
    const r = await gw.admin('OPTIONS', '/gateway/admin/routes', undefined, { Origin: 'http://example.com' });
    assert.equal(r.status, 200);
    assert.equal(r.text, '');
    assert.equal(r.headers.get('content-type'), 'text/plain; charset=utf-8');
    assert.equal(r.headers.get('access-control-allow-methods'), 'POST, GET, PUT, OPTIONS, DELETE, PATCH');
    assert.equal(r.headers.get('access-control-allow-headers'), '*');
    assert.equal(r.headers.get('access-control-allow-credentials'), 'true');
    assert.equal(r.headers.get('access-control-expose-headers'), '*');
    assert.equal(r.headers.get('access-control-max-age'), '3600');
  });

  it('HEAD /gateway/admin is 200 without a token; GET of that path is not routed (api.t)', async () => {
    const head = await gw.admin('HEAD', '/gateway/admin', undefined, {});
    assert.equal(head.status, 200);
    const get = await gw.admin('GET', '/gateway/admin', undefined, {});
    assert.equal(get.status, 404);
    assert.match(get.text, /<title>404 Not Found<\/title>/);
  });
});

describe('allow_admin', () => {
  it('a client outside the list gets nginx\'s 403 page before any token check', async () => {
    const denied = await startGateway({
      yaml: `apisix:
  node_listen: [{ip: 127.0.0.1, port: %PROXY%}]
nginx_config:
  worker_processes: 1
deployment:
  admin:
    admin_listen: {ip: 127.0.0.1, port: %ADMIN%}
    admin_key: [{name: admin, key: ${ADMIN_KEY}, role: admin}]
    allow_admin: [10.0.0.0/8]
`,
    });
    try {
      const r = await denied.admin('GET', '/gateway/admin/routes', undefined, {});
      assert.equal(r.status, 403);
      assert.match(r.text, /<title>403 Forbidden<\/title>/);
      assert.equal(r.headers.get('access-control-allow-origin'), null);
    } finally {
      await denied.stop();
    }
  });

  it('admin_key_required: false accepts requests without a key', async () => {
    const open = await startGateway({
      yaml: `apisix:
  node_listen: [{ip: 127.0.0.1, port: %PROXY%}]
nginx_config:
  worker_processes: 1
deployment:
  admin:
    admin_listen: {ip: 127.0.0.1, port: %ADMIN%}
    admin_key_required: false
    admin_key: [{name: admin, key: ${ADMIN_KEY}, role: admin}]
`,
    });
    try {
      const r = await open.admin('GET', '/gateway/admin/routes', undefined, {});
      assert.deepEqual([r.status, r.json], [200, { list: [], total: 0 }]);
    } finally {
      await open.stop();
    }
  });
});
