/**
 * A real etcd for the gateway's tests: Debian's etcd-server (/usr/bin/etcd,
 * `.ci/run` installs it) on loopback with free ports and a temporary data
 * directory, stopped and started again on the same data, and spoken to
 * directly over its JSON API (as another gateway node or an operator would).
 * Also a TCP relay between the gateway and etcd that can cut the network
 * without stopping etcd.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePorts } from '../kit/server.ts';
import { defaultYaml } from './harness.ts';
import type { Gateway } from './harness.ts';

export const etcdBinary = process.env.ETCD_BINARY ?? '/usr/bin/etcd';
/** A reason to skip when there is no etcd (CI installs it: `.ci/run`). */
export const etcdSkip: string | false = fs.existsSync(etcdBinary) ? false : `${etcdBinary} not installed (apt-get install etcd-server)`;

const b64 = (s: string): string => Buffer.from(s).toString('base64');
const unb64 = (s: string | undefined): string => Buffer.from(s ?? '', 'base64').toString();

export interface EtcdKv { key: string; value: string; create_revision: number; mod_revision: number; lease?: string }

const live = new Set<ChildProcess>();
process.once('exit', () => { for (const c of live) c.kill('SIGKILL'); });

export class Etcd {
  readonly dir: string;
  readonly port: number;
  readonly peerPort: number;
  private child: ChildProcess | undefined;
  private auth: { name: string; password: string } | undefined;
  private token: string | undefined;
  private exited: Promise<void> = Promise.resolve();

  /** With TLS: etcd's certificate, the client's, and the CA that signed both (files). */
  readonly tls: { cert: string; key: string; ca: string; clientCert: string; clientKey: string } | undefined;

  constructor(dir: string, port: number, peerPort: number, tls?: Etcd['tls']) {
    this.dir = dir;
    this.port = port;
    this.peerPort = peerPort;
    this.tls = tls;
  }

  get url(): string {
    return `${this.tls ? 'https' : 'http'}://127.0.0.1:${this.port}`;
  }

  /** One request to etcd (with the client certificate when TLS is on). */
  private post(api: string, body: string, headers: Record<string, string>): Promise<{ status: number; text: string }> {
    const mod = this.tls ? https : http;
    const tls = this.tls ? { ca: fs.readFileSync(this.tls.ca), cert: fs.readFileSync(this.tls.clientCert), key: fs.readFileSync(this.tls.clientKey), servername: 'localhost' } : {};
    return new Promise((resolve, reject) => {
      const req = mod.request(`${this.url}${api}`, { method: body === '' ? 'GET' : 'POST', headers, ...tls }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => { text += c; });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  /** Starts etcd on its data directory and waits until it answers (up to 20 s). */
  async start(): Promise<void> {
    const peer = `http://127.0.0.1:${this.peerPort}`;
    const log = fs.openSync(path.join(this.dir, 'etcd.log'), 'a');
    const child = spawn(etcdBinary, [
      '--name', 'test', '--data-dir', path.join(this.dir, 'data'),
      '--listen-client-urls', this.url, '--advertise-client-urls', this.url,
      '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer, '--initial-cluster', `test=${peer}`,
      ...(this.tls ? ['--cert-file', this.tls.cert, '--key-file', this.tls.key, '--trusted-ca-file', this.tls.ca, '--client-cert-auth'] : []),
    ], { stdio: ['ignore', log, log] });
    fs.closeSync(log);
    this.child = child;
    live.add(child);
    this.exited = new Promise((resolve) => child.once('exit', () => { live.delete(child); resolve(); }));
    const deadline = Date.now() + 20_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`etcd exited: ${fs.readFileSync(path.join(this.dir, 'etcd.log'), 'utf8').slice(-2000)}`);
      try {
        if ((await this.post('/health', '', {})).status === 200) return;
      } catch { /* not listening yet */ }
      if (Date.now() > deadline) throw new Error('etcd did not answer within 20 s');
      await sleep(50);
    }
  }

  /** Stops etcd (TERM) and waits for it to exit. */
  async stop(): Promise<void> {
    this.child?.kill('SIGTERM');
    await this.exited;
    this.child = undefined;
  }

  /** Stops it and removes its data. */
  async destroy(): Promise<void> {
    await this.stop();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  async call(api: string, body: unknown, retried = false): Promise<Record<string, any>> {
    if (this.auth && this.token === undefined && api !== '/v3/auth/authenticate') {
      this.token = (await this.call('/v3/auth/authenticate', this.auth)).token as string;
    }
    const headers: Record<string, string> = this.token === undefined ? {} : { authorization: this.token };
    const r = await this.post(api, JSON.stringify(body), headers);
    const json = JSON.parse(r.text) as Record<string, any>;
    if (json.code === 16 && !retried) {
      this.token = undefined; // an etcd restart forgets tokens
      return this.call(api, body, true);
    }
    if (r.status !== 200) throw new Error(`${api}: ${JSON.stringify(json)}`);
    return json;
  }

  /** Turns etcd's authentication on with a root user; the kit's own calls use it from then on. */
  async enableAuth(name: string, password: string): Promise<void> {
    await this.call('/v3/auth/role/add', { name: 'root' });
    await this.call('/v3/auth/user/add', { name, password });
    await this.call('/v3/auth/user/grant', { user: name, role: 'root' });
    await this.call('/v3/auth/enable', {});
    this.auth = { name, password };
  }

  /** A write from outside the gateway; returns its revision. */
  async put(key: string, value: string): Promise<number> {
    return Number((await this.call('/v3/kv/put', { key: b64(key), value: b64(value) })).header.revision);
  }

  async delete(key: string): Promise<number> {
    return Number((await this.call('/v3/kv/deleterange', { key: b64(key) })).header.revision);
  }

  async get(key: string): Promise<EtcdKv | undefined> {
    const kv = (await this.call('/v3/kv/range', { key: b64(key) })).kvs?.[0] as Record<string, string> | undefined;
    if (!kv) return undefined;
    return { key: unb64(kv.key), value: unb64(kv.value), create_revision: Number(kv.create_revision), mod_revision: Number(kv.mod_revision), lease: kv.lease };
  }

  async revision(): Promise<number> {
    return Number((await this.call('/v3/kv/range', { key: b64('/'), count_only: true })).header.revision);
  }

  /** How many watches etcd serves now (its `etcd_debugging_mvcc_watcher_total` gauge). */
  async watchers(): Promise<number> {
    const m = /^etcd_debugging_mvcc_watcher_total (\d+)$/m.exec((await this.post('/metrics', '', {})).text);
    if (!m) throw new Error('no watcher gauge in /metrics');
    return Number(m[1]);
  }

  /** Compacts the history up to the current revision (and waits for it). */
  async compact(): Promise<number> {
    const rev = await this.revision();
    await this.call('/v3/kv/compaction', { revision: String(rev), physical: true });
    return rev;
  }
}

/** A fresh etcd on free loopback ports in a temporary directory, started (`tls`: https, client certificates required). */
export async function startEtcd(tls?: Etcd['tls']): Promise<Etcd> {
  const [port, peerPort] = await freePorts(2);
  const etcd = new Etcd(fs.mkdtempSync(path.join(os.tmpdir(), 'gh-etcd-')), port, peerPort, tls);
  await etcd.start();
  return etcd;
}

/**
 * A TCP relay to `target`: `cut()` drops every connection and refuses new
 * ones (a network partition, etcd itself keeps running), `mend()` ends it;
 * `target` may be changed (etcd replaced behind the same address).
 */
export class Relay {
  readonly server: net.Server;
  /** Where new connections go (another etcd: `retarget`). */
  target: number;
  private readonly sockets = new Set<net.Socket>();
  private isCut = false;

  constructor(target: number) {
    this.target = target;
    this.server = net.createServer((client) => {
      if (this.isCut) { client.destroy(); return; }
      const upstream = net.connect(this.target, '127.0.0.1');
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => { client.destroy(); upstream.destroy(); });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  cut(): void {
    this.isCut = true;
    for (const s of this.sockets) s.destroy();
  }

  mend(): void {
    this.isCut = false;
  }

  close(): Promise<void> {
    this.cut();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

export async function startRelay(target: number): Promise<Relay> {
  const relay = new Relay(target);
  await new Promise<void>((resolve) => relay.server.listen(0, '127.0.0.1', resolve));
  return relay;
}

/** The harness's config.yaml with the store in etcd at `url` (and `extra` lines under deployment.etcd). */
export function etcdYaml(url: string, workers = 2, extra = ''): string {
  return `${defaultYaml(workers)}  etcd:
    host:
      - ${url}
    timeout: 5
${extra}`;
}

export interface WorkerStatus { worker: number; revision: number; keys: number; relists: number; last_relist_changes: number; error?: string }
export interface GatewayStatus { store: string; store_revision: number | null; store_error?: string; workers: WorkerStatus[] }

export async function gatewayStatus(gw: Gateway): Promise<GatewayStatus> {
  const r = await fetch(`http://127.0.0.1:${gw.adminPort}/gateway/status`);
  if (r.status !== 200) throw new Error(`/gateway/status: ${r.status}`);
  return await r.json() as GatewayStatus;
}

/** Polls the status endpoint until `done` holds (an event), failing after `ms` with the last status seen. */
export async function waitForStatus(gw: Gateway, done: (s: GatewayStatus) => boolean, ms = 20_000): Promise<GatewayStatus> {
  const deadline = Date.now() + ms;
  for (;;) {
    const s = await gatewayStatus(gw);
    if (done(s)) return s;
    if (Date.now() > deadline) throw new Error(`status never became as expected: ${JSON.stringify(s)}`);
    await sleep(20);
  }
}
