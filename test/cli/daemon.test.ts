// `daemon on` and the -s signals through the pid file; a busy port at start
// (compared with Debian's nginx: same [emerg] lines, same exit code).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { freePort, gatehouseBinary, nginxBinary, nginxSkip } from '../kit/server.ts';
import { httpGet } from '../kit/client.ts';
import { normalize, runCli, tempDir } from './run-cli.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const conf = (port: number, answer: string) => `
events {}
http { server { listen 127.0.0.1:${port}; location / { return 200 "${answer}\\n"; } } }
`;

/** A prefix with nginx.conf; `args` run it with the pid file and error log inside (daemon left to the config). */
function setup(text: string) {
  const t = tempDir();
  fs.writeFileSync(path.join(t.dir, 'nginx.conf'), text);
  // the default access log (logs/access.log, relative to the prefix)
  fs.mkdirSync(path.join(t.dir, 'logs'), { mode: 0o777 });
  const args = ['-p', `${t.dir}/`, '-c', 'nginx.conf', '-e', 'error.log', '-g', `pid ${t.dir}/nginx.pid; error_log ${t.dir}/error.log notice;`];
  return { ...t, args, pidFile: path.join(t.dir, 'nginx.pid') };
}

async function squat(port: number): Promise<net.Server> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(port, '127.0.0.1', () => r()));
  return s;
}

test('daemon on: returns once listening; -s reload, reopen and quit reach it through the pid file', async (t) => {
  const port = await freePort();
  const s = setup(conf(port, 'one'));
  let daemonPid = 0;
  t.after(() => {
    if (daemonPid && alive(daemonPid)) process.kill(daemonPid, 'SIGKILL');
    s.cleanup();
  });

  const start = await runCli(gatehouseBinary, s.args);
  assert.equal(start.code, 0, start.stderr);
  assert.equal(start.stderr, '');
  daemonPid = Number(fs.readFileSync(s.pidFile, 'latin1'));
  assert.notEqual(daemonPid, start.pid);
  assert.ok(alive(daemonPid));
  // listening already when the command returned
  assert.equal((await httpGet(port, '/')).body.toString(), 'one\n');

  fs.writeFileSync(path.join(s.dir, 'nginx.conf'), conf(port, 'two'));
  const reload = await runCli(gatehouseBinary, ['-s', 'reload', ...s.args]);
  assert.equal(reload.code, 0, reload.stderr);
  for (let i = 0; (await httpGet(port, '/')).body.toString() !== 'two\n'; i++) {
    assert.ok(i < 200, 'the reload did not take effect');
    await sleep(25);
  }

  fs.renameSync(path.join(s.dir, 'error.log'), path.join(s.dir, 'error.log.1'));
  const reopen = await runCli(gatehouseBinary, ['-s', 'reopen', ...s.args]);
  assert.equal(reopen.code, 0, reopen.stderr);
  for (let i = 0; !fs.existsSync(path.join(s.dir, 'error.log')); i++) {
    assert.ok(i < 200, 'error.log was not reopened');
    await sleep(25);
  }
  assert.match(fs.readFileSync(path.join(s.dir, 'error.log.1'), 'latin1'), /signal 10 \(SIGUSR1\) received, reopening logs/);

  const quit = await runCli(gatehouseBinary, ['-s', 'quit', ...s.args]);
  assert.equal(quit.code, 0, quit.stderr);
  for (let i = 0; alive(daemonPid); i++) {
    assert.ok(i < 400, 'the daemon did not exit');
    await sleep(25);
  }
  assert.equal(fs.existsSync(s.pidFile), false);
  const log = fs.readFileSync(path.join(s.dir, 'error.log'), 'latin1');
  assert.match(log, /signal 3 \(SIGQUIT\) received, shutting down/);
  assert.match(log, /\[notice\] \d+#\d+: exit$/m);
  assert.doesNotMatch(log, /\[(alert|emerg)\]/);
});

test('daemon on: a configuration error or a busy port is reported by the command, exit 1, nothing left running', async (t) => {
  const port = await freePort();
  const bad = setup(conf(port, 'x') + 'bogus_directive;\n');
  t.after(bad.cleanup);
  const r1 = await runCli(gatehouseBinary, bad.args);
  assert.equal(r1.code, 1);
  assert.match(r1.stderr, /^gatehouse: \[emerg\] unknown directive "bogus_directive" in .*nginx\.conf:4$/m);
  assert.equal(fs.existsSync(bad.pidFile), false);

  const busy = setup(conf(port, 'x'));
  t.after(busy.cleanup);
  const squatter = await squat(port);
  t.after(() => squatter.close());
  const r2 = await runCli(gatehouseBinary, busy.args);
  assert.equal(r2.code, 1);
  assert.match(r2.stderr, new RegExp(`^gatehouse: \\[emerg\\] bind\\(\\) to 127\\.0\\.0\\.1:${port} failed \\(98: Address already in use\\)$`, 'm'));
  assert.match(r2.stderr, /^gatehouse: \[emerg\] still could not bind\(\)$/m);
  assert.equal(fs.existsSync(busy.pidFile), false);
});

test('a busy port at start: nginx\'s bind() [emerg] lines on stderr and in the error log, exit 1', { skip: nginxSkip }, async (t) => {
  const port = await freePort();
  // SO_REUSEPORT on the other program too: only the bind check can see it
  const squatter = net.createServer();
  await new Promise<void>((r) => squatter.listen({ port, host: '127.0.0.1', reusePort: true }, () => r()));
  t.after(() => squatter.close());
  const ours = setup(conf(port, 'x'));
  const theirs = setup(conf(port, 'x'));
  t.after(() => { ours.cleanup(); theirs.cleanup(); });
  const daemonOff = (args: string[]) => args.map((a) => (a.startsWith('pid ') ? a.replace(/ notice;$/, ';') + ' daemon off;' : a));
  const [a, b] = await Promise.all([runCli(gatehouseBinary, daemonOff(ours.args)), runCli(nginxBinary, daemonOff(theirs.args))]);
  assert.equal(a.code, 1);
  assert.equal(b.code, 1);
  assert.equal(normalize(a.stderr), normalize(b.stderr));
  assert.match(a.stderr, new RegExp(`^gatehouse: \\[emerg\\] bind\\(\\) to 127\\.0\\.0\\.1:${port} failed \\(98: Address already in use\\)$`, 'm'));
  const logOf = (dir: string) => normalize(fs.readFileSync(path.join(dir, 'error.log'), 'latin1'));
  assert.equal(logOf(ours.dir), logOf(theirs.dir));
  assert.equal(fs.existsSync(ours.pidFile), false);
});
