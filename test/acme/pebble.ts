/**
 * A real ACME server for the tests: Debian's pebble on loopback, with
 * pebble-challtestsrv as its DNS so every test name resolves to 127.0.0.1.
 * Validation really happens (PEBBLE_VA_NOSLEEP only removes pebble's random
 * pauses): pebble connects back to Gatehouse on `httpPort` (http-01) or
 * `tlsPort` (tls-alpn-01).
 */
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { freePorts } from '../kit/server.ts';

export const pebbleSkip: string | false = fs.existsSync('/usr/bin/pebble') && fs.existsSync('/usr/bin/pebble-challtestsrv')
  ? false : 'pebble is not installed (apt-get install pebble)';

export interface Pebble {
  /** The ACME directory URL. */
  url: string;
  /** PEM file of pebble's own TLS certificate (for `ssl_trusted_certificate`). */
  trusted: string;
  dir: string;
  /** pebble-challtestsrv's DNS port (every name is 127.0.0.1; pebble's own name there is acme.test). */
  dnsPort: number;
  /** pebble-challtestsrv's management API (`/set-txt`, `/clear-txt`: the records pebble's dns-01 sees). */
  dnsManagement: string;
  /** The root that signs what pebble issues (management port /roots/0), or an alternate one. */
  root(index?: number): Promise<string>;
  /** Lines pebble logged so far. */
  log(): string;
  stop(): Promise<void>;
}

export interface PebbleOptions {
  httpPort: number;
  tlsPort: number;
  /** externalAccountBindingRequired with these MAC keys (kid → base64url key). */
  eab?: Record<string, string>;
  /** Lifetime of the certificates pebble issues (its default is 5 years). */
  validitySeconds?: number;
  /** Extra root chains pebble offers as `Link: rel="alternate"` (PEBBLE_ALTERNATE_ROOTS). */
  alternateRoots?: number;
  /** The DNS server pebble validates with (default: pebble-challtestsrv). */
  dnsServerPort?: number;
}

function get(url: string, ca: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    https.get(url, { ca, timeout: 2000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    }).on('error', reject).on('timeout', function (this: { destroy(e: Error): void }) { this.destroy(new Error('timeout')); });
  });
}

/** Retries `fn` until it returns a value (not undefined) or the deadline passes. */
export async function waitFor<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function exited(p: ChildProcess): Promise<void> {
  return p.exitCode !== null || p.signalCode !== null ? Promise.resolve() : new Promise((r) => p.once('exit', () => r()));
}

export async function startPebble(opts: PebbleOptions): Promise<Pebble> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-acme-pebble-'));
  const [acmePort, mgmtPort, dnsPort, ctsMgmtPort] = await freePorts(4);
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', key, '-out', cert, '-days', '30', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:acme.test'], { stdio: 'ignore' });
  fs.writeFileSync(path.join(dir, 'pebble.json'), JSON.stringify({
    pebble: {
      listenAddress: `127.0.0.1:${acmePort}`, managementListenAddress: `127.0.0.1:${mgmtPort}`,
      certificate: cert, privateKey: key, httpPort: opts.httpPort, tlsPort: opts.tlsPort, ocspResponderURL: '',
      externalAccountBindingRequired: opts.eab !== undefined, externalAccountMACKeys: opts.eab ?? {},
      ...(opts.validitySeconds ? { certificateValidityPeriod: opts.validitySeconds } : {}),
    },
  }));
  let output = '';
  const collect = (p: ChildProcess) => {
    p.stdout?.on('data', (c: Buffer) => { output += c.toString(); });
    p.stderr?.on('data', (c: Buffer) => { output += c.toString(); });
  };
  const dns = spawn('pebble-challtestsrv', ['-dns01', `127.0.0.1:${dnsPort}`, '-http01', '', '-https01', '', '-tlsalpn01', '',
    '-management', `127.0.0.1:${ctsMgmtPort}`, '-defaultIPv4', '127.0.0.1', '-defaultIPv6', ''], { stdio: ['ignore', 'pipe', 'pipe'] });
  collect(dns);
  const pebble = spawn('pebble', ['-config', path.join(dir, 'pebble.json'), '-dnsserver', `127.0.0.1:${opts.dnsServerPort ?? dnsPort}`],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', PEBBLE_ALTERNATE_ROOTS: String(opts.alternateRoots ?? 0) } });
  collect(pebble);
  const procs = [pebble, dns];
  const stop = async () => {
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    await Promise.all(procs.map(exited));
    if (!process.env.KEEP_TEST_PREFIX) fs.rmSync(dir, { recursive: true, force: true });
  };
  const url = `https://127.0.0.1:${acmePort}/dir`;
  const ca = fs.readFileSync(cert, 'latin1');
  try {
    await waitFor('pebble\'s directory', async () => ((await get(url, ca)).status === 200 ? true : undefined), 15_000);
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}\n${output}`);
  }
  return {
    url, trusted: cert, dir, dnsPort, dnsManagement: `http://127.0.0.1:${ctsMgmtPort}`, stop, log: () => output,
    root: async (index = 0) => (await get(`https://127.0.0.1:${mgmtPort}/roots/${index}`, ca)).body,
  };
}

/** The certificate a TLS client verifying against `ca` sees for `servername`, or undefined when it does not verify. */
export function verifiedPeer(port: number, servername: string | undefined, ca: string): Promise<tls.PeerCertificate | undefined> {
  return new Promise((resolve) => {
    const s = tls.connect({ host: '127.0.0.1', port, servername, ca, rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] }, () => {
      const peer = s.authorized ? s.getPeerCertificate() : undefined;
      s.destroy();
      resolve(peer);
    });
    s.on('error', () => resolve(undefined));
    s.setTimeout(5000, () => { s.destroy(); resolve(undefined); });
  });
}

/** The certificate served for `servername`, whoever signed it. */
export function servedCertificate(port: number, servername: string): Promise<tls.PeerCertificate> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: '127.0.0.1', port, servername, rejectUnauthorized: false }, () => {
      const peer = s.getPeerCertificate();
      s.destroy();
      resolve(peer);
    });
    s.on('error', reject);
  });
}
