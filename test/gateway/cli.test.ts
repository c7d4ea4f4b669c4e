/**
 * `gatehouse gateway` on APISIX's config.yaml: `-t` names the bad key, `-T`
 * prints the nginx configuration the gateway runs on, and an empty admin
 * key is generated at the first start, written back and printed once.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { gatehouseBinary } from '../kit/server.ts';
import { startGateway } from './harness.ts';

function prefixWith(yaml: string): string {
  const prefix = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-gwcli-'));
  fs.mkdirSync(path.join(prefix, 'conf'));
  fs.writeFileSync(path.join(prefix, 'conf', 'config.yaml'), yaml);
  return prefix;
}

function run(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(gatehouseBinary, ['gateway', ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('gatehouse gateway -t / -T', () => {
  it('-t names the key that is wrong', () => {
    const cases: Array<[string, string]> = [
      ['apisix:\n  node_listen: [70000]\n', 'apisix.node_listen[1]: expected a port number (1-65535), got 70000'],
      ['deployment:\n  admin:\n    admin_listen: {port: x}\n', 'deployment.admin.admin_listen.port: expected a port number (1-65535), got "x"'],
      ['nginx_config:\n  worker_processes: many\n', 'nginx_config.worker_processes: expected "auto" or a positive number, got "many"'],
      ['deployment:\n  admin:\n    admin_key: [{name: a, key: k, role: root}]\n', 'deployment.admin.admin_key[1].role: expected "admin" or "viewer", got "root"'],
      ['apisix:\n  data_encryption:\n    keyring: [short]\n', 'apisix.data_encryption.keyring[1]: expected 16 bytes (AES-128) or 32 bytes (AES-256), got 5'],
      ['apisix: [1\n', 'Flow sequence in block collection must be sufficiently indented'],
      ['deployment:\n  etcd:\n    host: [ftp://127.0.0.1:2379]\n', 'deployment.etcd.host[1]: expected an http:// or https:// URL, got "ftp://127.0.0.1:2379"'],
      ['deployment:\n  etcd:\n    host: [http://127.0.0.1:2379]\n    timeout: soon\n', 'deployment.etcd.timeout: expected a number of seconds, got "soon"'],
      ['deployment:\n  etcd:\n    host: [http://127.0.0.1:2379]\n    user: root\n', 'deployment.etcd: user and password go together'],
      ['deployment:\n  etcd:\n    host: [https://127.0.0.1:2379]\n    tls: {cert: conf/none.crt, key: conf/none.key}\n', 'deployment.etcd.tls.cert: cannot read "conf/none.crt": ENOENT'],
      ['nginx_config:\n  http:\n    access_log_format_escape: xml\n', 'nginx_config.http.access_log_format_escape: expected one of default, json, none, got "xml"'],
      ['nginx_config:\n  http:\n    real_ip_recursive: maybe\n', 'nginx_config.http.real_ip_recursive: expected on or off, got "maybe"'],
      ['deployment:\n  role_traditional:\n    config_provider: consul\n', 'deployment.role_traditional.config_provider: expected "etcd" or "embedded", got "consul"'],
    ];
    for (const [yaml, message] of cases) {
      const prefix = prefixWith(yaml);
      const r = run('-p', prefix, '-t');
      const file = path.join(prefix, 'conf', 'config.yaml');
      assert.equal(r.status, 1, yaml);
      assert.ok(r.stderr.includes(message), `${yaml}: ${r.stderr}`);
      assert.ok(r.stderr.includes(`configuration file ${file} test failed`), r.stderr);
    }
  });

  it('-t refuses an open allow_admin without any admin key, as APISIX does', () => {
    const prefix = prefixWith('deployment:\n  admin:\n    allow_admin: [0.0.0.0/0]\n');
    const r = run('-p', prefix, '-t');
    assert.equal(r.status, 1);
    assert.match(r.stderr, /deployment\.admin\.admin_key: missing valid Admin API token\./);
  });

  it('-T prints the nginx configuration: admin server with allow/deny and gateway_admin, the proxy listeners', () => {
    const prefix = prefixWith(`apisix:
  node_listen: [{ip: 127.0.0.1, port: 19080}, 19081]
deployment:
  admin:
    admin_listen: {ip: 127.0.0.1, port: 19180}
    admin_key: [{name: admin, key: abc, role: admin}]
    allow_admin: [127.0.0.0/24, "::1"]
`);
    const r = run('-p', prefix, '-T');
    assert.equal(r.status, 0, r.stderr);
    const conf = path.join(prefix, 'conf', 'gateway-nginx.conf');
    assert.ok(r.stdout.startsWith(`# configuration file ${conf}:\n`));
    for (const line of ['listen 127.0.0.1:19180;', 'allow 127.0.0.0/24;', 'allow ::1;', 'deny all;', 'gateway_admin;',
      'listen 127.0.0.1:19080 default_server;', 'listen 19081;', 'pid logs/nginx.pid;', 'error_log logs/error.log warn;']) {
      assert.ok(r.stdout.includes(line), line);
    }
    assert.match(r.stderr, /config\.yaml syntax is ok/);
  });
});

describe('the generated admin key', () => {
  it('an empty admin key is replaced at the first start, written back, printed once', async () => {
    const yaml = `apisix:
  node_listen: [{ip: 127.0.0.1, port: %PROXY%}]
nginx_config:
  worker_processes: 1
deployment:
  admin:
    admin_listen: {ip: 127.0.0.1, port: %ADMIN%}
    admin_key:
      - name: admin
        key: ''   # generated
        role: admin
`;
    const gw = await startGateway({ yaml });
    let key: string;
    try {
      const m = /generated the Admin API key of "admin" and wrote it to .*: ([A-Za-z]{32})\n/.exec(gw.stderr);
      assert.ok(m, gw.stderr);
      key = m[1];
      const text = fs.readFileSync(path.join(gw.prefix, 'conf', 'config.yaml'), 'utf8');
      assert.ok(text.includes(key) && text.includes('# generated'), text);
      const r = await gw.admin('GET', '/gateway/admin/routes', undefined, { 'X-API-KEY': key });
      assert.equal(r.status, 200);
    } finally {
      await gw.stop();
    }
    const again = await startGateway({ prefix: gw.prefix });
    try {
      assert.doesNotMatch(again.stderr, /generated/);
      const r = await again.admin('GET', '/gateway/admin/routes', undefined, { 'X-API-KEY': key });
      assert.equal(r.status, 200);
    } finally {
      await again.stop();
    }
  });
});

describe('gatehouse gateway -s reload', () => {
  it('rebuilds from config.yaml: a key added to the file works after the reload', async () => {
    const gw = await startGateway();
    try {
      const file = path.join(gw.prefix, 'conf', 'config.yaml');
      const newKey = 'addedAfterStartKeyAddedAfterStart';
      fs.writeFileSync(file, fs.readFileSync(file, 'utf8') + `      - name: added\n        key: ${newKey}\n        role: admin\n`);
      const before = await gw.admin('GET', '/gateway/admin/routes', undefined, { 'X-API-KEY': newKey });
      assert.equal(before.status, 401);
      const r = run('-p', gw.prefix, '-s', 'reload');
      assert.equal(r.status, 0, r.stderr);
      // the new workers' configuration answers once the reload is through
      // (an idle keepalive connection the retiring workers close may fail a request: as with nginx, the client asks again)
      for (;;) {
        const after = await gw.admin('GET', '/gateway/admin/routes', undefined, { 'X-API-KEY': newKey }).catch(() => undefined);
        if (after?.status === 200) break;
        if (after) assert.equal(after.status, 401);
      }
    } finally {
      await gw.stop();
    }
  });
});
