/**
 * config.yaml's nginx_config.http and configuration snippets become the
 * http directives of the gateway's nginx configuration, with APISIX's
 * defaults (no body size limit, X-Real-IP trusted from 127.0.0.1, the
 * access log in APISIX's format), as APISIX's nginx.conf template writes them.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { defaultYaml, startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { proxy, put, startOrigin, untilRouted } from './dataplane-kit.ts';
import type { Origin } from './dataplane-kit.ts';

let o: Origin;
before(async () => { o = await startOrigin(); });
after(async () => { await o.close(); });

const route = () => ({ uri: '/echo', upstream: { type: 'roundrobin', nodes: { [o.node]: 1 } } });

describe('APISIX\'s defaults', () => {
  let gw: Gateway;
  before(async () => { gw = await startGateway(); });
  after(async () => { await gw.stop(); });

  it('a body over nginx\'s 1m default passes; X-Real-IP from 127.0.0.1 is the client; the access log line is APISIX\'s (the upstream Host passed on)', async () => {
    await put(gw, 'routes/echo', route());
    const big = 'x'.repeat(2 * 1024 * 1024);
    const r = await untilRouted(gw, '/echo', (x) => x.status === 200, { method: 'POST', body: big, headers: { 'X-Real-IP': '192.0.2.7' } });
    assert.equal(r.echo?.body.length, big.length);
    assert.equal(r.echo?.headers['x-real-ip'], '192.0.2.7');
    await gw.stop();
    const log = fs.readFileSync(path.join(gw.prefix, 'logs', 'access.log'), 'utf8');
    const line = log.split('\n').find((l) => l.includes('"POST /echo HTTP/1.1" 200'));
    assert.ok(line, log);
    assert.match(line, new RegExp(String.raw`^192\.0\.2\.7 - - \[[^\]]+\] 127\.0\.0\.1:${gw.proxyPort} "POST /echo HTTP/1\.1" 200 \d+ [\d.]+ "-" "-" ${o.node} 200 [\d.]+ "http://127\.0\.0\.1:${gw.proxyPort}/echo"$`));
  });
});

describe('nginx_config.http set', () => {
  let gw: Gateway;
  before(async () => {
    gw = await startGateway({
      yaml: defaultYaml().replace('nginx_config:\n', `nginx_config:
  http:
    client_max_body_size: 1k
    enable_access_log: false
    real_ip_from: [192.0.2.0/24]
    custom_lua_shared_dict:
      my-cache: 1m
  http_configuration_snippet: |
    map $http_x_flag $flag_seen { default yes; "" no; }
  http_server_location_configuration_snippet: |
    add_header X-Flag-Seen $flag_seen;
`),
    });
  });
  after(async () => { await gw.stop(); });

  it('the body limit, the snippets where APISIX puts them, no access log, X-Real-IP not trusted from elsewhere', async () => {
    await put(gw, 'routes/echo', route());
    const r = await untilRouted(gw, '/echo', (x) => x.status === 200, { headers: { 'X-Flag': '1', 'X-Real-IP': '192.0.2.7' } });
    assert.equal(r.headers['x-flag-seen'], 'yes');
    assert.equal(r.echo?.headers['x-real-ip'], '127.0.0.1');
    assert.equal((await proxy(gw, '/echo', { method: 'POST', body: 'x'.repeat(2048) })).status, 413);
    const conf = fs.readFileSync(path.join(gw.prefix, 'conf', 'gateway-nginx.conf'), 'utf8');
    assert.match(conf, /^ {4}lua_shared_dict my-cache 1m;$/m);
    assert.match(conf, /^ {4}access_log off;$/m);
    assert.equal(fs.existsSync(path.join(gw.prefix, 'logs', 'access.log')) ? fs.readFileSync(path.join(gw.prefix, 'logs', 'access.log'), 'utf8') : '', '');
  });
});
