// Start and stop Gatehouse or Debian's nginx from a throw-away prefix, the
// way nginx's own perl harness (nginx-tests, lib/Test/Nginx.pm) does:
//
//   BINARY -p PREFIX/ -c nginx.conf -e error.log \
//          -g "pid PREFIX/nginx.pid; error_log PREFIX/error.log debug; daemon off;"
//
// `daemon off;` is added (unless the config sets `daemon` itself or
// opts.daemon is true) so the spawned process is the master: its stderr is
// captured, `exited` means the master exited, and stop() can wait for it.
// nginx-tests configs say `daemon off;` themselves for the same reason.

import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as dgram from 'node:dgram';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

export const gatehouseBinary: string = fileURLToPath(new URL('../../bin/gatehouse', import.meta.url));
export const nginxBinary: string = process.env.NGINX_BINARY ?? '/usr/sbin/nginx';
export const nginxModulesDir: string = process.env.NGINX_MODULES_DIR ?? '/usr/lib/nginx/modules';

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** True when the reference nginx binary exists and is executable. */
export const nginxAvailable: boolean = isExecutable(nginxBinary);

/** For `test(name, { skip: nginxSkip }, fn)`: false, or the reason to skip. */
export const nginxSkip: string | false = nginxAvailable
  ? false
  : process.env.NGINX_BINARY
    ? `NGINX_BINARY=${process.env.NGINX_BINARY} is not an executable; reference test skipped`
    : "Debian's nginx is not installed (apt-get install nginx); reference test skipped";

/** Inside a test: `if (skipWithoutNginx(t)) return;` */
export function skipWithoutNginx(t: { skip(message?: string): void }): boolean {
  if (nginxSkip === false) return false;
  t.skip(nginxSkip);
  return true;
}

export interface StartOptions {
  /** nginx.conf text. `%%PREFIX%%` (alias `%%TESTDIR%%`) becomes the prefix
   * path (no trailing slash), `%%PORT_n%%` / `%%PORT_n_UDP%%` a free port
   * (see RunningServer.port(n)). `%%TEST_GLOBALS%%` and `%%TEST_GLOBALS_HTTP%%`
   * expand as in nginx-tests; with %%TEST_GLOBALS%% no -g is passed. Must not
   * set `pid` or `error_log` at main level otherwise (-g sets them). */
  conf: string;
  /** Extra files, paths relative to the prefix; string contents get the same
   * %%...%% expansion as conf, Buffers are written verbatim. A string that
   * starts with `#!` is a script and is written executable, before the server
   * starts (a server may run it at once: acme's dns_hook does). */
  files?: Record<string, string | Buffer>;
  /** Extra command-line arguments, inserted before -g. */
  args?: string[];
  /** Extra environment for the server process. */
  env?: Record<string, string>;
  /** Wait for PREFIX/nginx.pid (default true). When false, resolves right
   * after spawning; use `exited` / `output()` (e.g. for `-t`). */
  waitForPid?: boolean;
  /** Startup timeout (default 10 s). */
  timeoutMs?: number;
  /** Let the server daemonize (no `daemon off;` in -g). Default: false,
   * unless the config has its own `daemon` directive. */
  daemon?: boolean;
  /** Level of the error log given with -g (default `debug`, as nginx-tests does).
   * Benchmarks want `error`: Debian's nginx is built --with-debug and would
   * spend most of its time writing debug lines. */
  errorLogLevel?: string;
  /** The configuration sets `error_log` itself: -g gives no error log (-e still names PREFIX/error.log as the default). */
  ownErrorLog?: boolean;
  /** nginx run only: `load_module MODULES_DIR/<name>.so;` lines prepended to
   * the config, e.g. ['ngx_stream_module'] or ['ngx_http_lua_module']
   * (ndk_http_module is added in front of lua automatically). Ignored by
   * startGatehouse. */
  nginxModules?: string[];
}

export type ServerFlavor = 'nginx' | 'gatehouse';

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface StopResult extends ExitInfo {
  /** True when the graceful signal did not work in time and SIGKILL was used. */
  forced: boolean;
}

const live = new Set<RunningServer>();
let cleanupInstalled = false;

function installCleanup(): void {
  if (cleanupInstalled) return;
  cleanupInstalled = true;
  process.on('exit', () => {
    for (const s of live) s.killSync();
  });
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const handler = (): void => {
      for (const s of live) s.killSync();
      process.removeListener(sig, handler);
      if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
    };
    process.on(sig, handler);
  }
}

function normalizeSignal(name: string): NodeJS.Signals {
  const upper = name.toUpperCase();
  return (upper.startsWith('SIG') ? upper : `SIG${upper}`) as NodeJS.Signals;
}

function errCode(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | undefined)?.code;
}

/** Alive and not a zombie. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if (errCode(e) !== 'EPERM') return false;
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return true;
  }
}

function tryKill(pid: number, sig: NodeJS.Signals | 0): boolean {
  // Never signal everything (-1), init, ourselves or our own process group.
  if (!Number.isInteger(pid) || Math.abs(pid) <= 1 || Math.abs(pid) === process.pid) return false;
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function readPidFile(file: string): number | undefined {
  let text: string;
  try {
    text = fs.readFileSync(file, 'latin1');
  } catch {
    return undefined;
  }
  // nginx writes "PID\n"; an empty or partial file means "not yet".
  const m = /^\s*(\d+)\s*\n/.exec(text);
  return m ? Number(m[1]) : undefined;
}

/**
 * Ports for test servers come from below the kernel's ephemeral range
 * (32768-60999 here): a port the kernel handed out for :0 may be handed out
 * again, as the source port of any outgoing connection of a test running
 * alongside, before the server binds it (a CI run once failed with "Address
 * already in use" that way). Random picks in 10000-32767 only meet each other.
 *
 * They must not meet either: a port is free between the pick and the
 * server's bind, and Gatehouse's workers bind with SO_REUSEPORT after a
 * check, so two servers of test files running side by side that picked the
 * same port in that window share it silently and answer each other's
 * connections (a CI run once got another server's "400 The SSL certificate
 * error" that way). So every pick is also reserved across processes: a file
 * named by the port, created exclusively, holding the pid, removed when the
 * process exits; a file whose pid is gone is taken over.
 */
const PORT_MIN = 10_000;
const PORT_SPAN = 32_768 - PORT_MIN;
const reservations = path.join(os.tmpdir(), 'gatehouse-test-ports');
const reservedHere: string[] = [];

/** The one port of our range on the Fetch standard's "bad ports" list: fetch() refuses it ("bad port"). */
const FETCH_BAD_PORT = 10_080;

function randomPort(): number {
  for (;;) {
    const port = PORT_MIN + Math.floor(Math.random() * PORT_SPAN);
    if (port !== FETCH_BAD_PORT && reserve(port)) return port;
  }
}

function reserve(port: number): boolean {
  const file = path.join(reservations, String(port));
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(file, String(process.pid), { flag: 'wx' });
      if (reservedHere.push(file) === 1) process.once('exit', () => { for (const f of reservedHere) fs.rmSync(f, { force: true }); });
      return true;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') { fs.mkdirSync(reservations, { recursive: true }); continue; }
      if (code !== 'EEXIST' || !ownerGone(file)) return false;
      fs.rmSync(file, { force: true });
    }
  }
  return false;
}

function ownerGone(file: string): boolean {
  const pid = Number(fs.readFileSync(file, 'utf8'));
  if (!Number.isInteger(pid) || pid <= 0) return true;
  try {
    process.kill(pid, 0);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** A free TCP port on 127.0.0.1, outside the ephemeral range. */
export async function freePort(): Promise<number> {
  return (await freePorts(1))[0]!;
}

/** n distinct free TCP ports (all held open at once, then released), reserved for this process. */
export async function freePorts(n: number): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    while (servers.length < n) {
      const srv = net.createServer();
      const ok = await new Promise<boolean>((resolve) => {
        srv.once('error', () => resolve(false));
        srv.listen({ host: '127.0.0.1', port: randomPort(), exclusive: true }, () => resolve(true));
      });
      if (ok) servers.push(srv);
    }
    return servers.map((s) => (s.address() as net.AddressInfo).port);
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  }
}

/** A free UDP port on 127.0.0.1, outside the ephemeral range. */
export async function freeUdpPort(): Promise<number> {
  for (;;) {
    const sock = dgram.createSocket('udp4');
    const port = randomPort();
    const ok = await new Promise<boolean>((resolve) => {
      sock.once('error', () => resolve(false));
      sock.bind(port, '127.0.0.1', () => resolve(true));
    });
    await new Promise<void>((r) => sock.close(() => r()));
    if (ok) return port;
  }
}

function moduleLines(modules: string[] | undefined): string {
  if (!modules || modules.length === 0) return '';
  const names = modules.map((m) => m.replace(/\.so$/, ''));
  const hasNdk = names.some((n) => path.basename(n) === 'ndk_http_module');
  const needsNdk = names.some((n) => path.basename(n) === 'ngx_http_lua_module');
  if (needsNdk && !hasNdk) names.unshift('ndk_http_module');
  return names
    .map((n) => `load_module ${n.includes('/') ? n : path.join(nginxModulesDir, n)}.so;\n`)
    .join('');
}

interface ExpandContext {
  prefix: string;
  ports: Map<string, number>;
  globals: string;
  moduleLines: string;
}

async function allocatePorts(texts: string[], ports: Map<string, number>): Promise<void> {
  const re = /%%PORT_(\d+)(_UDP)?%%/g;
  for (const text of texts) {
    for (const m of text.matchAll(re)) {
      const key = m[2] ? `${m[1]}_UDP` : m[1]!;
      if (!ports.has(key)) ports.set(key, m[2] ? await freeUdpPort() : await freePort());
    }
  }
}

function expandText(text: string, ctx: ExpandContext): string {
  const p = ctx.prefix;
  return text
    .replace(/%%TEST_GLOBALS%%/g, () => ctx.globals.split(';').filter((s) => s.trim()).map((s) => `${s.trim()};\n`).join('') + ctx.moduleLines)
    .replace(/%%TEST_GLOBALS_HTTP%%/g, () =>
      [
        `root ${p};`,
        `access_log ${p}/access.log;`,
        `client_body_temp_path ${p}/client_body_temp;`,
        `fastcgi_temp_path ${p}/fastcgi_temp;`,
        `proxy_temp_path ${p}/proxy_temp;`,
        `uwsgi_temp_path ${p}/uwsgi_temp;`,
        `scgi_temp_path ${p}/scgi_temp;`,
        '',
      ].join('\n'))
    .replace(/%%TEST_GLOBALS_STREAM%%/g, '')
    .replace(/%%(?:PREFIX|TESTDIR)%%/g, () => p)
    .replace(/%%PORT_(\d+)(_UDP)?%%/g, (_all, n: string, udp: string | undefined) => String(ctx.ports.get(udp ? `${n}_UDP` : n)));
}

function tailOf(text: string, lines: number): string {
  const all = text.split('\n');
  if (all.at(-1) === '') all.pop();
  return all.slice(-lines).join('\n');
}

/** Important error.log lines (emerg/alert/crit/error) plus the last few. */
function logSummary(file: string): string {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return '(no error.log)';
  }
  const important = text.split('\n').filter((l) => /\[(emerg|alert|crit|error)\]/.test(l));
  return [
    important.length ? `important lines:\n${important.slice(-20).join('\n')}` : '',
    `last lines:\n${tailOf(text, 15)}`,
  ].filter(Boolean).join('\n');
}

export class RunningServer {
  readonly prefix: string;
  readonly binary: string;
  readonly flavor: ServerFlavor;
  readonly process: ChildProcess;
  /** Master pid as read from the pid file at startup (spawned pid when waitForPid: false). */
  pid: number;
  private readonly exitedPromise: Promise<ExitInfo>;
  /** Ports allocated for %%PORT_n%% placeholders, keyed "n" or "n_UDP". */
  readonly ports: ReadonlyMap<string, number>;
  exitInfo: ExitInfo | undefined;
  private stdoutChunks: Buffer[] = [];
  private stderrChunks: Buffer[] = [];
  private stopping: Promise<StopResult> | undefined;
  private readonly expandCtx: ExpandContext;

  constructor(init: {
    prefix: string;
    binary: string;
    flavor: ServerFlavor;
    child: ChildProcess;
    ports: Map<string, number>;
    expandCtx: ExpandContext;
  }) {
    this.prefix = init.prefix;
    this.binary = init.binary;
    this.flavor = init.flavor;
    this.process = init.child;
    this.pid = init.child.pid ?? 0;
    this.ports = init.ports;
    this.expandCtx = init.expandCtx;
    const cap = 4 << 20;
    let outBytes = 0;
    let errBytes = 0;
    init.child.stdout?.on('data', (b: Buffer) => {
      if ((outBytes += b.length) <= cap) this.stdoutChunks.push(b);
    });
    init.child.stderr?.on('data', (b: Buffer) => {
      if ((errBytes += b.length) <= cap) this.stderrChunks.push(b);
    });
    this.exitedPromise = new Promise<ExitInfo>((resolve) => {
      init.child.once('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        resolve(this.exitInfo);
      });
      init.child.once('error', () => {
        // spawn failure (ENOENT, EACCES): no 'exit' will follow.
        this.exitInfo ??= { code: null, signal: null };
        resolve(this.exitInfo);
      });
    });
  }

  /** Resolves when the spawned process exits (the master, unless daemonized).
   * Awaiting it keeps the event loop alive until then. */
  get exited(): Promise<ExitInfo> {
    if (this.exitInfo === undefined) this.process.ref();
    return this.exitedPromise;
  }

  /** Absolute path of a prefix-relative file (absolute paths pass through). */
  path(rel: string): string {
    return path.resolve(this.prefix, rel);
  }

  /** Port allocated for %%PORT_n%% (or %%PORT_n_UDP%% with udp). */
  port(n: number | string, udp = false): number {
    const p = this.ports.get(udp ? `${n}_UDP` : String(n));
    if (p === undefined) throw new Error(`no %%PORT_${n}${udp ? '_UDP' : ''}%% in this server's config or files`);
    return p;
  }

  /** Everything the spawned process wrote to stdout/stderr so far. */
  output(): { stdout: string; stderr: string } {
    return {
      stdout: Buffer.concat(this.stdoutChunks).toString('utf8'),
      stderr: Buffer.concat(this.stderrChunks).toString('utf8'),
    };
  }

  /** The master pid currently in the pid file, falling back to `pid`. */
  currentPid(): number {
    return readPidFile(this.path('nginx.pid')) ?? this.pid;
  }

  /** Send a signal ('HUP', 'USR1', 'SIGQUIT', ...) to the current master. */
  signal(name: string): void {
    process.kill(this.currentPid(), normalizeSignal(name));
  }

  readFile(rel: string): string {
    return fs.readFileSync(this.path(rel), 'utf8');
  }

  /** Write a file under the prefix (directories created); string contents get %%...%% expansion. */
  writeFile(rel: string, data: string | Buffer): void {
    const file = this.path(rel);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, typeof data === 'string' ? expandText(data, this.expandCtx) : data);
  }

  /** Replace nginx.conf (with the same expansion and load_module lines as at start), e.g. before reload(). */
  writeConf(conf: string): void {
    const missing = [...conf.matchAll(/%%PORT_(\d+)(_UDP)?%%/g)].filter((m) => !this.ports.has(m[2] ? `${m[1]}_UDP` : m[1]!));
    if (missing.length) throw new Error(`writeConf: ${missing[0]![0]} was not allocated at start`);
    const text = /%%TEST_GLOBALS%%/.test(conf) ? conf : this.expandCtx.moduleLines + conf;
    fs.writeFileSync(this.path('nginx.conf'), expandText(text, this.expandCtx));
  }

  /** Size in bytes of a log file (0 when missing); pass as `from` to waitForLog. */
  logSize(rel = 'error.log'): number {
    try {
      return fs.statSync(this.path(rel)).size;
    } catch {
      return 0;
    }
  }

  /** Lines of a log file ([] when missing). */
  logLines(rel = 'error.log'): string[] {
    let text: string;
    try {
      text = fs.readFileSync(this.path(rel), 'utf8');
    } catch {
      return [];
    }
    const lines = text.split('\n');
    if (lines.at(-1) === '') lines.pop();
    return lines;
  }

  private readFrom(rel: string, from: number): string {
    try {
      const buf = fs.readFileSync(this.path(rel));
      return buf.subarray(Math.min(from, buf.length)).toString('utf8');
    } catch {
      return '';
    }
  }

  /** Poll a log file (from byte offset `from`) until `re` matches; returns the matching line. */
  async waitForLog(rel: string, re: RegExp, timeoutMs = 5000, from = 0): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    const plain = new RegExp(re.source, re.flags.replace(/[gy]/g, ''));
    for (;;) {
      const text = this.readFrom(rel, from);
      const m = plain.exec(text);
      if (m) {
        const start = text.lastIndexOf('\n', m.index) + 1;
        let end = text.indexOf('\n', m.index + Math.max(m[0].length - 1, 0));
        if (end < 0) end = text.length;
        return text.slice(start, end);
      }
      if (Date.now() >= deadline) {
        throw new Error(`waitForLog: ${re} not found in ${rel} within ${timeoutMs} ms; tail:\n${tailOf(text, 15)}`);
      }
      await sleep(50);
    }
  }

  /**
   * SIGHUP the master and wait for the reload to take effect: by default until
   * error.log shows an old worker "gracefully shutting down" (it no longer
   * accepts, so new connections reach new workers) or an [emerg] (reload
   * refused, old config stays). Falls back to returning once new lines have
   * stopped arriving for 500 ms, or after timeoutMs. Returns the error.log
   * text written since the HUP.
   */
  async reload(opts: { timeoutMs?: number; until?: RegExp } = {}): Promise<string> {
    const timeoutMs = opts.timeoutMs ?? 5000;
    const until = opts.until ?? /gracefully shutting down|\[emerg\]/;
    const from = this.logSize('error.log');
    this.signal('HUP');
    const deadline = Date.now() + timeoutMs;
    let lastLen = 0;
    let lastChange = Date.now();
    for (;;) {
      await sleep(25);
      const text = this.readFrom('error.log', from);
      if (until.test(text)) return text;
      if (text.length !== lastLen) {
        lastLen = text.length;
        lastChange = Date.now();
      } else if (text.length > 0 && Date.now() - lastChange >= 500) {
        return text;
      }
      if (Date.now() >= deadline) return text;
    }
  }

  /**
   * Stop: send `signal` (default QUIT, graceful) to the master from the pid
   * file, wait for it (and the spawned process) to exit, SIGKILL the process
   * group after timeoutMs, then remove the prefix unless KEEP_TEST_PREFIX.
   */
  stop(signal = 'QUIT', timeoutMs = 10000): Promise<StopResult> {
    this.stopping ??= this.doStop(signal, timeoutMs);
    return this.stopping;
  }

  private async doStop(signal: string, timeoutMs: number): Promise<StopResult> {
    const masters = new Set<number>([this.pid, this.currentPid()].filter((p) => p > 0));
    const target = this.currentPid();
    if (this.exitInfo === undefined || isAlive(target)) tryKill(target, normalizeSignal(signal));
    const allGone = (): boolean => this.exitInfo !== undefined && [...masters].every((p) => !isAlive(p));
    const deadline = Date.now() + timeoutMs;
    while (!allGone() && Date.now() < deadline) await sleep(20);
    let forced = false;
    if (!allGone()) {
      forced = true;
      this.killSync(false);
      const hard = Date.now() + 3000;
      while (!allGone() && Date.now() < hard) await sleep(20);
    } else {
      // Stray processes left in the group (e.g. workers of a killed master).
      this.killGroupsSync();
    }
    live.delete(this);
    this.destroyPipes();
    if (!process.env.KEEP_TEST_PREFIX) await fsp.rm(this.prefix, { recursive: true, force: true });
    return { ...(this.exitInfo ?? { code: null, signal: null }), forced };
  }

  private groupIds(): number[] {
    const ids = new Set<number>();
    for (const p of [this.process.pid ?? 0, this.pid, readPidFile(this.path('nginx.pid')) ?? 0, readPidFile(this.path('nginx.pid.oldbin')) ?? 0]) {
      if (p > 0) ids.add(p);
    }
    return [...ids];
  }

  private killGroupsSync(): void {
    for (const id of this.groupIds()) tryKill(-id, 'SIGKILL');
  }

  private destroyPipes(): void {
    this.process.stdout?.destroy();
    this.process.stderr?.destroy();
  }

  /** SIGKILL everything this server started (process group and pids); sync, for exit handlers. */
  killSync(removePrefix = true): void {
    for (const id of this.groupIds()) {
      tryKill(-id, 'SIGKILL');
      tryKill(id, 'SIGKILL');
    }
    if (removePrefix) {
      live.delete(this);
      if (!process.env.KEEP_TEST_PREFIX) {
        try {
          fs.rmSync(this.prefix, { recursive: true, force: true });
        } catch {
          // best effort at exit
        }
      }
    }
  }
}

/**
 * How long a server (or a worker thread, which loads the same modules) may take
 * to start. Generous: CI runs test files side by side on two cores, and a
 * worker's start there has been seen to take more than 4 s, and more than 10 s
 * while other work loaded the machine.
 */
export const SERVER_START_LIMIT_MS = 30_000;

/**
 * Shared implementation of startGatehouse/startNginx. `flavor` decides only
 * whether opts.nginxModules is honoured.
 */
export async function startServer(binary: string, opts: StartOptions, flavor: ServerFlavor = 'gatehouse'): Promise<RunningServer> {
  installCleanup();
  const timeoutMs = opts.timeoutMs ?? SERVER_START_LIMIT_MS;
  const prefix = await fsp.mkdtemp(path.join(os.tmpdir(), 'gh-test-'));
  // Workers of a root-started nginx run as `nobody` and must read the prefix.
  await fsp.chmod(prefix, 0o755);
  // Gatehouse's default access log is PREFIX/logs/access.log (as a source-built nginx's); the directory must exist
  await fsp.mkdir(path.join(prefix, 'logs'));

  const ports = new Map<string, number>();
  const texts = [opts.conf, ...Object.values(opts.files ?? {}).filter((v): v is string => typeof v === 'string')];
  await allocatePorts(texts, ports);

  const confDaemon = /^\s*daemon\s+(on|off)\s*;/m.exec(opts.conf)?.[1];
  const daemonizes = confDaemon ? confDaemon === 'on' : opts.daemon === true;
  let globals = `pid ${prefix}/nginx.pid;${opts.ownErrorLog ? '' : ` error_log ${prefix}/error.log ${opts.errorLogLevel ?? 'debug'};`}`;
  if (!opts.daemon && !confDaemon) globals += ' daemon off;';
  const mods = flavor === 'nginx' ? moduleLines(opts.nginxModules) : '';
  const useTestGlobals = /%%TEST_GLOBALS%%/.test(opts.conf);
  const ctx: ExpandContext = { prefix, ports, globals, moduleLines: mods };

  const confText = expandText(useTestGlobals ? opts.conf : mods + opts.conf, ctx);
  await fsp.writeFile(path.join(prefix, 'nginx.conf'), confText);
  for (const [rel, data] of Object.entries(opts.files ?? {})) {
    const file = path.resolve(prefix, rel);
    await fsp.mkdir(path.dirname(file), { recursive: true });
    const script = typeof data === 'string' && data.startsWith('#!');
    await fsp.writeFile(file, typeof data === 'string' ? expandText(data, ctx) : data, script ? { mode: 0o755 } : {});
  }

  const args = ['-p', `${prefix}/`, '-c', 'nginx.conf', '-e', 'error.log', ...(opts.args ?? [])];
  if (!useTestGlobals) args.push('-g', globals);

  const env: Record<string, string | undefined> = { ...process.env, ...opts.env };
  // bin/gatehouse may fall back to `node` on PATH: make that this Node.
  env.PATH = `${path.dirname(process.execPath)}:${env.PATH ?? '/usr/bin:/bin'}`;

  const child = spawn(binary, args, {
    cwd: prefix,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    // Own process group: stop()/cleanup can kill master and workers at once.
    detached: true,
  });
  let spawnError: Error | undefined;
  child.once('error', (e) => {
    spawnError = e;
  });
  // Never let a forgotten server keep the test process alive; the exit
  // handler kills it.
  child.unref();
  for (const s of [child.stdout, child.stderr]) (s as net.Socket | null)?.unref();

  const server = new RunningServer({ prefix, binary, flavor, child, ports, expandCtx: ctx });
  live.add(server);

  if (opts.waitForPid === false) return server;

  const pidFile = path.join(prefix, 'nginx.pid');
  const deadline = Date.now() + timeoutMs;
  const closed = new Promise<void>((r) => child.once('close', () => r()));
  const fail = async (why: string): Promise<never> => {
    // Let stderr drain (bounded: a daemon may still hold the pipe).
    if (server.exitInfo) await Promise.race([closed, sleep(500)]);
    const { stderr, stdout } = server.output();
    const msg = [
      `${path.basename(binary)} ${why}`,
      `command: ${binary} ${args.map((a) => (/\s/.test(a) ? JSON.stringify(a) : a)).join(' ')}`,
      stderr.trim() ? `stderr:\n${stderr.trimEnd()}` : 'stderr: (empty)',
      stdout.trim() ? `stdout:\n${stdout.trimEnd()}` : '',
      `error.log ${logSummary(path.join(prefix, 'error.log'))}`,
    ].filter(Boolean).join('\n');
    server.killSync();
    throw new Error(msg);
  };
  let exitedAt: number | undefined;
  for (;;) {
    const pid = readPidFile(pidFile);
    if (pid !== undefined) {
      server.pid = pid;
      return server;
    }
    if (spawnError) return fail(`could not be started: ${spawnError.message}`);
    const info = server.exitInfo;
    if (info) {
      // A daemonizing server's launcher exits 0 before the daemon writes the
      // pid file; anything else (or 0 and still no pid file after a while) is a failure.
      exitedAt ??= Date.now();
      if (info.code !== 0) {
        await sleep(50);
        if (readPidFile(pidFile) === undefined) {
          return fail(`exited before writing its pid file (${info.signal ? `signal ${info.signal}` : `code ${info.code}`})`);
        }
        continue;
      }
      if (!daemonizes && Date.now() - exitedAt > 1000) {
        return fail('exited with code 0 without writing its pid file');
      }
    }
    if (Date.now() >= deadline) return fail(`did not write ${pidFile} within ${timeoutMs} ms`);
    await sleep(50);
  }
}

export function startGatehouse(opts: StartOptions): Promise<RunningServer> {
  return startServer(gatehouseBinary, opts, 'gatehouse');
}

export function startNginx(opts: StartOptions): Promise<RunningServer> {
  return startServer(nginxBinary, opts, 'nginx');
}
