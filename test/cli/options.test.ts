// The command line: help, version, option errors, -t/-T/-q and -s, each
// compared with Debian's nginx 1.22 where the text is nginx's (reference:
// `nginx -h`, `nginx -x`, `nginx -t`, `nginx -s reload` run on the same
// arguments; the program name and nginx's build defaults differ by design).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { gatehouseBinary, nginxBinary, nginxSkip } from '../kit/server.ts';
import { normalize, runCli, tempDir } from './run-cli.ts';
import { WITH, WITHOUT } from '../../src/cli/features.ts';

const gh = (args: string[], cwd?: string) => runCli(gatehouseBinary, args, { cwd });
const ngx = (args: string[], cwd?: string) => runCli(nginxBinary, args, { cwd });

/** Help text without the version lines, our extra `gateway` usage line and the build-specific defaults. */
function helpBody(stderr: string): string {
  return normalize(stderr)
    .split('\n')
    .filter((l) => !/ version: /.test(l) && !/ gateway /.test(l))
    .join('\n')
    .replace(/\b(nginx|gatehouse)\b/g, 'NAME')
    .replace(/\(default: [^)]*\)/g, '(default: …)');
}

test('-h and -? print the usage on stderr, like nginx', { skip: nginxSkip }, async () => {
  for (const flag of ['-h', '-?', '-hv']) {
    const [ours, theirs] = await Promise.all([gh([flag]), ngx([flag])]);
    assert.equal(ours.code, 0, flag);
    assert.equal(ours.stdout, '');
    assert.match(ours.stderr, /^gatehouse version: gatehouse\/\d+\.\d+\.\d+\n/);
    assert.match(ours.stderr, /^Usage: gatehouse \[-\?hvVtTq\] \[-s signal\] \[-p prefix\]$/m);
    assert.equal(helpBody(ours.stderr), helpBody(theirs.stderr), flag);
  }
});

test('-v prints the versions; the nginx line is the one nginx tools parse', async () => {
  const r = await gh(['-v']);
  assert.equal(r.code, 0);
  assert.equal(r.stdout, '');
  const lines = r.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 2);
  assert.match(lines[0], /^gatehouse version: gatehouse\/\d+\.\d+\.\d+$/);
  assert.equal(lines[1], 'nginx version: nginx/1.28.0');
});

test('-V lets nginx-tests detect the modules: --with for what we add, --without for what we lack', async () => {
  const r = await gh(['-V']);
  assert.equal(r.code, 0);
  const out = r.stderr;
  assert.match(out, /^nginx version: nginx\/1\.28\.0$/m);
  assert.match(out, /^built with OpenSSL \d+\.\d+\.\d+/m);
  assert.match(out, /^TLS SNI support enabled$/m);
  const args = /^configure arguments: (.*)$/m.exec(out)?.[1];
  assert.ok(args, 'configure arguments line');
  const words = new Set(args.split(' '));
  for (const m of WITHOUT) assert.ok(words.has(`--without-${m}`), `--without-${m}`);
  for (const m of WITH) assert.ok(words.has(`--with-${m}`), `--with-${m}`);
  // the harness's own tests (lib/Test/Nginx.pm has_module): http and rewrite are there
  assert.doesNotMatch(out, /--without-http(?!\S)/);
  assert.doesNotMatch(out, /--without-http_rewrite_module/);
});

test('option errors: nginx\'s messages and exit code 1', { skip: nginxSkip }, async () => {
  const cases = [['-x'], ['foo'], ['-s'], ['-s', 'restart'], ['-p'], ['-c'], ['-e'], ['-g'], ['-tx'], ['-vz']];
  for (const args of cases) {
    const [ours, theirs] = await Promise.all([gh(args), ngx(args)]);
    assert.equal(ours.code, 1, args.join(' '));
    assert.equal(ours.code, theirs.code, args.join(' '));
    assert.equal(normalize(ours.stderr), normalize(theirs.stderr), args.join(' '));
    assert.equal(ours.stdout, '');
  }
});

const goodConf = 'events {}\n';

/** -p DIR/ -c nginx.conf -e DIR/e.log -g "pid DIR/x.pid;" in a private directory. */
function setup(conf: string, extra: Record<string, string> = {}) {
  const t = tempDir();
  fs.writeFileSync(path.join(t.dir, 'nginx.conf'), conf);
  for (const [name, text] of Object.entries(extra)) fs.writeFileSync(path.join(t.dir, name), text);
  const args = ['-p', `${t.dir}/`, '-c', 'nginx.conf', '-e', `${t.dir}/e.log`, '-g', `pid ${t.dir}/x.pid;`];
  return { ...t, args };
}

test('-t, -q -t and -T on a good configuration, like nginx', { skip: nginxSkip }, async (t) => {
  const s = setup(goodConf + 'include inc.conf;\n', { 'inc.conf': '# included\n' });
  t.after(s.cleanup);
  for (const flags of [['-t'], ['-q', '-t'], ['-tq'], ['-T'], ['-T', '-q']]) {
    const [ours, theirs] = await Promise.all([gh([...flags, ...s.args]), ngx([...flags, ...s.args])]);
    assert.equal(ours.code, 0, flags.join(' '));
    assert.equal(normalize(ours.stderr, s.dir), normalize(theirs.stderr, s.dir), flags.join(' '));
    assert.equal(ours.stdout.replaceAll(s.dir, 'DIR'), theirs.stdout.replaceAll(s.dir, 'DIR'), flags.join(' '));
  }
  const dump = (await gh(['-T', ...s.args])).stdout;
  assert.ok(dump.includes(`# configuration file ${s.dir}/nginx.conf:\n${goodConf}include inc.conf;\n`));
  assert.ok(dump.includes(`# configuration file ${s.dir}/inc.conf:\n# included\n`));
});

test('-t on a bad configuration: [emerg] with file:line, "test failed", exit 1; -q does not hide errors', { skip: nginxSkip }, async (t) => {
  const s = setup(goodConf + '\nno_such_directive on;\n');
  t.after(s.cleanup);
  for (const flags of [['-t'], ['-q', '-t']]) {
    const [ours, theirs] = await Promise.all([gh([...flags, ...s.args]), ngx([...flags, ...s.args])]);
    assert.equal(ours.code, 1);
    assert.equal(theirs.code, 1);
    assert.equal(normalize(ours.stderr, s.dir), normalize(theirs.stderr, s.dir));
    assert.match(ours.stderr, /^gatehouse: \[emerg\] unknown directive "no_such_directive" in .*nginx\.conf:3$/m);
  }
  // the -e log has the same [emerg] line
  assert.match(fs.readFileSync(path.join(s.dir, 'e.log'), 'latin1'), /\[emerg\] \d+#\d+: unknown directive "no_such_directive" in .*nginx\.conf:3$/m);
});

test('a missing configuration file: nginx\'s open() failure, exit 1', { skip: nginxSkip }, async (t) => {
  const s = setup(goodConf);
  t.after(s.cleanup);
  const args = s.args.map((a) => (a === 'nginx.conf' ? 'missing.conf' : a));
  for (const flags of [['-t'], []]) {
    const withDaemonOff = flags.length ? args : [...args.slice(0, -1), `${args.at(-1)} daemon off;`];
    const [ours, theirs] = await Promise.all([gh([...flags, ...withDaemonOff]), ngx([...flags, ...withDaemonOff])]);
    assert.equal(ours.code, 1);
    assert.equal(theirs.code, 1);
    assert.equal(normalize(ours.stderr, s.dir), normalize(theirs.stderr, s.dir));
  }
});

test('-s with no running server: nginx\'s messages for a missing pid file, a bad one, a dead pid', { skip: nginxSkip }, async (t) => {
  const s = setup(goodConf);
  t.after(s.cleanup);
  const pidFile = path.join(s.dir, 'x.pid');
  const cases: Array<[string, string | undefined]> = [
    ['reload', undefined],
    ['quit', 'garbage\n'],
    ['reopen', '\n'],
    // a pid that cannot exist (above pid_max)
    ['stop', '4194305\n'],
  ];
  for (const [signal, pidText] of cases) {
    if (pidText === undefined) fs.rmSync(pidFile, { force: true });
    else fs.writeFileSync(pidFile, pidText);
    fs.rmSync(path.join(s.dir, 'e.log'), { force: true });
    const ours = await gh(['-s', signal, ...s.args]);
    const oursLog = fs.readFileSync(path.join(s.dir, 'e.log'), 'latin1');
    fs.rmSync(path.join(s.dir, 'e.log'), { force: true });
    const theirs = await ngx(['-s', signal, ...s.args]);
    const theirsLog = fs.readFileSync(path.join(s.dir, 'e.log'), 'latin1');
    assert.equal(ours.code, 1, signal);
    assert.equal(theirs.code, 1, signal);
    assert.equal(normalize(ours.stderr, s.dir), normalize(theirs.stderr, s.dir), signal);
    // the -e log: "signal process started" and the error
    assert.equal(normalize(oursLog, s.dir), normalize(theirsLog, s.dir), signal);
  }
});

test('-e stderr: errors are full error-log lines on stderr, as nginx prints them', { skip: nginxSkip }, async (t) => {
  const s = setup(goodConf + 'bogus;\n');
  t.after(s.cleanup);
  const args = s.args.map((a) => (a.endsWith('e.log') ? 'stderr' : a));
  const [ours, theirs] = await Promise.all([gh(['-t', ...args]), ngx(['-t', ...args])]);
  assert.equal(ours.code, 1);
  assert.match(ours.stderr, /^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[emerg\] \d+#\d+: unknown directive "bogus"/m);
  assert.equal(normalize(ours.stderr, s.dir), normalize(theirs.stderr, s.dir));
});
