/**
 * `npm start`: runs bin/gatehouse in the foreground on conf/nginx.conf (or
 * the file given as the first argument) and says where it listens. The
 * server itself stays as quiet as nginx; this wrapper does the talking.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Cycle, resolvePaths } from '../src/core/cycle.ts';
import { modules } from '../src/modules.ts';
import { coreConf, coreSettings } from '../src/core/modules/core.ts';
import { ConfError } from '../src/conf/errors.ts';

const root = path.resolve(fileURLToPath(new URL('..', import.meta.url)));
const confFile = process.argv[2] ?? 'conf/nginx.conf';
fs.mkdirSync(path.join(root, 'logs'), { recursive: true });

let cycle: Cycle;
try {
  cycle = Cycle.load(modules, { paths: resolvePaths(root + '/', confFile) });
} catch (err) {
  if (!(err instanceof ConfError)) throw err;
  console.error(`gatehouse: [emerg] ${err.text}`);
  process.exit(1);
}

const pidFile = coreSettings(cycle).pid;
try { fs.unlinkSync(pidFile); } catch { /* not there */ }
// stay in the foreground unless the configuration says otherwise explicitly
const foreground = cycle.main.get(coreConf).daemon === undefined ? ['-g', 'daemon off;'] : [];
const child = spawn(path.join(root, 'bin/gatehouse'), ['-p', root + '/', '-c', confFile, ...foreground], { stdio: 'inherit' });

const started = Date.now();
const waitForPid = setInterval(() => {
  if (fs.existsSync(pidFile)) {
    clearInterval(waitForPid);
    const urls = [...cycle.listeners.values()].map((l) =>
      l.path !== undefined ? `unix:${l.path}` : `http://${l.host === '0.0.0.0' ? '127.0.0.1' : l.host}:${l.port}/`);
    console.log(`Gatehouse is listening on ${urls.join(', ')}`);
    console.log(`configuration: ${cycle.paths.confFile}; logs: ${path.join(root, 'logs')}/; Ctrl-C stops it`);
  } else if (Date.now() - started > 10_000) {
    clearInterval(waitForPid);
    console.error('gatehouse did not start within 10 s; see logs/error.log');
  }
}, 50);

for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => child.kill('SIGQUIT'));
child.on('exit', (code) => process.exit(code ?? 0));
