/**
 * A corpus of configurations written in the shapes of the best-known public
 * nginx collections (test/conf/real-configs/, listed in real-configs.ts): for
 * each, `gatehouse -t` and Debian's `nginx -t` agree, then both servers run
 * it and a set of requests gets the same answers (status, headers but the
 * date and server name, body) from both. PHP goes to a real php-fpm,
 * proxies to a backend this test runs, TLS uses certificates made here.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startPair } from '../kit/pair.ts';
import { nginxModulesDir, nginxSkip } from '../kit/server.ts';
import { CertFactory } from '../tls/certs.ts';
import { phpFpmSkip, startPhpFpm } from '../http/fastcgi-kit.ts';
import type { PhpFpm } from '../http/fastcgi-kit.ts';
import { runCase } from './reference.ts';
import { corpus } from './real-configs.ts';
import { readConfig, send, startBackends } from './real-configs-kit.ts';
import type { CorpusConfig, Placeholders } from './real-configs-kit.ts';

let fpm: PhpFpm | undefined;
let backends: Awaited<ReturnType<typeof startBackends>>;
let placeholders: Placeholders;
const certs = fs.mkdtempSync(path.join(os.tmpdir(), 'gatehouse-corpus-certs-'));

before(async () => {
  fs.chmodSync(certs, 0o755);
  const factory = new CertFactory(certs);
  factory.selfSigned('example.com', { subject: '/CN=example.com/' });
  execFileSync('openssl', ['genpkey', '-genparam', '-algorithm', 'DH', '-pkeyopt', 'dh_param:ffdhe2048', '-out', path.join(certs, 'dhparam.pem')]);
  for (const f of fs.readdirSync(certs)) fs.chmodSync(path.join(certs, f), 0o644);
  if (!phpFpmSkip) fpm = await startPhpFpm({});
  backends = await startBackends();
  placeholders = { fpm: `127.0.0.1:${fpm?.port ?? 9}`, backend: `127.0.0.1:${backends.backend}`, echo: `127.0.0.1:${backends.echo}`, certs };
});

after(async () => {
  await fpm?.stop();
  await backends?.stop();
  fs.rmSync(certs, { recursive: true, force: true });
});

const skipOf = (c: CorpusConfig): string | false => c.differs || (c.php && phpFpmSkip) || false;

test('real configurations: gatehouse -t as nginx -t', { skip: nginxSkip, concurrency: 2, timeout: 120_000 }, async (t) => {
  for (const c of corpus) {
    void t.test(c.dir, { skip: c.differs ?? false }, async () => {
      const { conf, files } = readConfig(c, placeholders);
      const all: Record<string, string | Buffer> = { 'nginx.conf': conf, ...files };
      for (const [k, v] of Object.entries(all)) if (typeof v === 'string') all[k] = v.replace(/%%PORT_(\d+)%%/g, '$1');
      const nginxGlobals = c.stream ? `load_module ${nginxModulesDir}/ngx_stream_module.so;` : undefined;
      const [want, got] = await Promise.all([runCase('nginx', { name: c.dir, files: all, nginxGlobals }), runCase('gatehouse', { name: c.dir, files: all })]);
      assert.deepEqual({ code: got.code, stderr: got.stderr }, { code: want.code, stderr: want.stderr });
      assert.equal(want.code, 0, `nginx accepts the configuration: ${want.stderr}`);
    });
  }
});

// two configurations at a time: each is two server starts and a few requests
test('real configurations: answers as nginx\'s', { skip: nginxSkip, concurrency: 2, timeout: 180_000 }, async (t) => {
  for (const c of corpus) {
    void t.test(`${c.dir}: ${c.about}`, { skip: skipOf(c) }, async (t) => {
      const { conf, files } = readConfig(c, placeholders);
      const pair = await startPair(t, { conf, files, nginxModules: c.stream ? ['ngx_stream_module'] : undefined });
      for (const r of c.requests) {
        const what = `${r.method ?? 'GET'} ${r.path}${r.headers ? ` ${JSON.stringify(r.headers)}` : ''}${r.tls ? ` (TLS ${r.tls})` : ''}`;
        const got = await send(pair.gh, r);
        const want = await send(pair.ng!, r);
        if (process.env.CORPUS_DEBUG) console.log(c.dir, what, JSON.stringify(got));
        assert.deepEqual(got, want, what);
      }
    });
  }
});
