/**
 * Starts the real `bin/gatehouse gateway` on a temporary prefix with an
 * APISIX-style config.yaml on loopback ports, and talks HTTP to its Admin
 * API. Ready means the master wrote logs/nginx.pid (after its workers
 * listen).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseDocument } from 'yaml';
import { freePorts, gatehouseBinary } from '../kit/server.ts';

export const ADMIN_KEY = 'edd1c9f034335f136f87ad84b625c8f1';
export const VIEWER_KEY = '4054f7cf07e344346cd3f287985e76a2';

export interface GatewayOptions {
  /** YAML text; `%ADMIN%` and `%PROXY%` become free ports. Default: admin and viewer keys, 1 worker. */
  yaml?: string;
  /** Reuse this prefix (a restart). */
  prefix?: string;
  workers?: number;
  /** Extra environment for the gateway process (its workers inherit it). */
  env?: Record<string, string>;
}

export function defaultYaml(workers = 1): string {
  return `apisix:
  node_listen:
    - ip: 127.0.0.1
      port: %PROXY%
nginx_config:
  worker_processes: ${workers}
  error_log_level: info
deployment:
  admin:
    admin_listen:
      ip: 127.0.0.1
      port: %ADMIN%
    admin_key:
      - name: admin
        key: ${ADMIN_KEY}
        role: admin
      - name: viewer
        key: ${VIEWER_KEY}
        role: viewer
`;
}

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

export class Gateway {
  readonly prefix: string;
  readonly adminPort: number;
  readonly proxyPort: number;
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  stderr = '';

  constructor(prefix: string, adminPort: number, proxyPort: number, child: ChildProcess) {
    this.prefix = prefix;
    this.adminPort = adminPort;
    this.proxyPort = proxyPort;
    this.child = child;
    child.stderr?.on('data', (b: Buffer) => { this.stderr += b.toString(); });
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  /** An Admin API request with the admin key (unless `headers` sets its own). */
  async admin(method: string, uri: string, body?: unknown, headers: Record<string, string> = { 'X-API-KEY': ADMIN_KEY }): Promise<Reply> {
    const init: RequestInit = { method, headers };
    // fetch refuses a GET or HEAD with a body (an APISIX test may write one): it goes without
    if (body !== undefined && method !== 'GET' && method !== 'HEAD') init.body = typeof body === 'string' || Buffer.isBuffer(body) ? body as string : JSON.stringify(body);
    const res = await fetch(`http://127.0.0.1:${this.adminPort}${uri}`, init);
    const text = await res.text();
    let json: unknown;
    try { json = JSON.parse(text); } catch { json = undefined; }
    return { status: res.status, headers: res.headers, text, json };
  }

  /** QUIT (graceful) and wait for the master to exit. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGQUIT');
    await this.exited;
  }

  /** kill -9 of the master (its workers are threads: they go with it). */
  async kill9(): Promise<void> {
    this.child.kill('SIGKILL');
    await this.exited;
  }
}

/**
 * APISIX opens its TLS port 9443, the prometheus export port 9091 and the
 * control API's 9090 by default: a config that does not mention them gets
 * `apisix.ssl.enable: false`, `plugin_attr.prometheus.enable_export_server:
 * false` and `apisix.enable_control: false`, so tests
 * running side by side do not all bind them (tests of those ports write
 * their own sections). The lines go in right under the section's key (or a
 * new section at the top), so the file's end stays the test's own: tests
 * append to it.
 */
function withoutDefaultPorts(text: string): string {
  let out = text;
  /** `lines` undefined: `key: value` on one line. */
  const add = (section: string, key: string, lines: string[], value?: string) => {
    const doc = parseDocument(out);
    if (doc.getIn([section, key]) !== undefined) return;
    const entry = (indent: string) => (value === undefined ? `${indent}${key}:\n${lines.map((l) => `${indent}${indent}${l}\n`).join('')}` : `${indent}${key}: ${value}\n`);
    const at = new RegExp(`^${section}:[ \t]*\n`, 'm').exec(out);
    if (!at) {
      out = `${section}:\n${entry('  ')}${out}`;
      return;
    }
    const after = at.index + at[0].length;
    const indent = /^([ \t]+)/.exec(out.slice(after))?.[1] ?? '  ';
    out = `${out.slice(0, after)}${entry(indent)}${out.slice(after)}`;
  };
  // a test of the control API sets `enable_control: true` and `control` with a free port
  if (parseDocument(out).getIn(['apisix', 'control']) === undefined) add('apisix', 'enable_control', [], 'false');
  add('apisix', 'ssl', ['enable: false']);
  add('plugin_attr', 'prometheus', ['enable_export_server: false']);
  const check = parseDocument(out);
  if (check.errors.length || check.getIn(['apisix', 'ssl']) === undefined || check.getIn(['plugin_attr', 'prometheus']) === undefined) {
    throw new Error(`harness: could not add the default-port sections to the test's config.yaml:\n${out}`);
  }
  return out;
}

/** Gateways still running when the test process exits (a failed test) are killed with it. */
const live = new Set<ChildProcess>();
process.once('exit', () => { for (const c of live) c.kill('SIGKILL'); });

export async function startGateway(opts: GatewayOptions = {}): Promise<Gateway> {
  const prefix = opts.prefix ?? fs.mkdtempSync(path.join(os.tmpdir(), 'gh-gateway-'));
  const confFile = path.join(prefix, 'conf', 'config.yaml');
  let adminPort: number;
  let proxyPort: number;
  if (opts.prefix && fs.existsSync(confFile)) {
    const text = fs.readFileSync(path.join(prefix, 'ports'), 'utf8').split(' ');
    [adminPort, proxyPort] = text.map(Number);
  } else {
    [adminPort, proxyPort] = await freePorts(2);
    fs.mkdirSync(path.dirname(confFile), { recursive: true });
    const yaml = (opts.yaml ?? defaultYaml(opts.workers)).replace(/%ADMIN%/g, String(adminPort)).replace(/%PROXY%/g, String(proxyPort));
    fs.writeFileSync(confFile, withoutDefaultPorts(yaml));
    fs.writeFileSync(path.join(prefix, 'ports'), `${adminPort} ${proxyPort}`);
  }
  const pidFile = path.join(prefix, 'logs', 'nginx.pid');
  fs.rmSync(pidFile, { force: true });
  const child = spawn(gatehouseBinary, ['gateway', '-p', prefix], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...opts.env } });
  live.add(child);
  child.once('exit', () => live.delete(child));
  const gw = new Gateway(prefix, adminPort, proxyPort, child);
  let exited = false;
  void gw.exited.then(() => { exited = true; });
  // A gateway that neither gets ready nor exits fails the caller's before() instead of hanging it.
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8').endsWith('\n')) return gw;
    if (exited) throw new Error(`gatehouse gateway exited before it was ready:\n${gw.stderr}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`gatehouse gateway was not ready (no ${pidFile}) after 60 s:\n${gw.stderr}`);
    }
    await sleep(25);
  }
}
