// access_log paths with variables: a file per value, relative paths under the
// prefix, nothing written while the request's root is missing (with nginx's
// error line), and open_log_file_cache keeping descriptors (the scenario of
// nginx-tests' access_log.t: min_uses, max with least-recently-used
// eviction, writes continuing to a moved directory through a kept
// descriptor). Compared with Debian's nginx (reference: nginx 1.22).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { startGatehouse, startNginx, nginxSkip } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { httpGet } from '../kit/client.ts';
import { lines, waitLines } from './helpers.ts';

const conf = `
events {}
http {
    log_format f '$uri:$arg_n';
    access_log %%PREFIX%%/main.log f;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        location /var { access_log %%PREFIX%%/vlogs/v_\${arg_name}.log f; return 200; }
        location /rel { access_log vlogs/rel_$arg_name f; return 200; }
        location /noroot { root %%PREFIX%%/missing; access_log %%PREFIX%%/vlogs/nr_$arg_name f; return 200; }
        location /last { return 200; }
        location /cache {
            open_log_file_cache max=3 inactive=20s valid=1m min_uses=2;
            access_log %%PREFIX%%/vlogs/dir/c_$arg_name f;
            return 200;
        }
    }
}
`;

interface Outcome {
  files: Record<string, string[]>;
  errors: string[];
}

async function scenario(srv: RunningServer): Promise<Outcome> {
  // workers of a root-started nginx run as nobody: the log directory must be theirs to write
  fs.mkdirSync(srv.path('vlogs/dir'), { recursive: true });
  fs.chmodSync(srv.path('vlogs'), 0o777);
  fs.chmodSync(srv.path('vlogs/dir'), 0o777);
  const port = srv.port(8080);
  const get = (p: string) => httpGet(port, p);
  await get('/var?name=a&n=1');
  await get('/var?name=b&n=2');
  await get('/var?name=a&n=3');
  await get('/var?n=4');
  await get('/rel?name=x&n=5');
  await get('/noroot?name=y&n=6');
  for (const name of ['lru', 'lru', 'once', 'first', 'first', 'second', 'second']) await get(`/cache?name=${name}`);
  fs.renameSync(srv.path('vlogs/dir'), srv.path('vlogs/moved'));
  for (const name of ['lru', 'once', 'first', 'second']) await get(`/cache?name=${name}`);
  await get('/last');
  await waitLines(srv, 'main.log', 1);
  fs.renameSync(srv.path('vlogs/moved'), srv.path('vlogs/dir'));
  const files: Record<string, string[]> = {};
  for (const dir of ['vlogs', 'vlogs/dir']) {
    for (const f of fs.readdirSync(srv.path(dir)).sort()) {
      if (fs.statSync(srv.path(`${dir}/${f}`)).isFile()) files[`${dir}/${f}`] = lines(srv, `${dir}/${f}`);
    }
  }
  const errors = lines(srv, 'error.log')
    .filter((l) => /\[(error|crit)\]/.test(l))
    .map((l) => l.replace(/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[(\w+)\] \d+#\d+: \*\d+ /, '[$1] ').replaceAll(srv.prefix, 'PREFIX'));
  return { files, errors };
}

async function run(start: typeof startGatehouse): Promise<Outcome> {
  const srv = await start({ conf, files: { 'html/index.html': 'x' } });
  try {
    return await scenario(srv);
  } finally {
    await srv.stop();
  }
}

test('paths with variables and open_log_file_cache', async () => {
  const got = await run(startGatehouse);
  assert.deepEqual(got.files['vlogs/v_a.log'], ['/var:1', '/var:3']);
  assert.deepEqual(got.files['vlogs/v_b.log'], ['/var:2']);
  assert.deepEqual(got.files['vlogs/v_.log'], ['/var:4']);
  assert.deepEqual(got.files['vlogs/rel_x'], ['/rel:5']);
  assert.equal(got.files['vlogs/nr_y'], undefined);
  // kept descriptors wrote into the moved directory; the others could not open their file
  assert.deepEqual(got.files['vlogs/dir/c_lru'], ['/cache:-', '/cache:-']);
  assert.deepEqual(got.files['vlogs/dir/c_once'], ['/cache:-']);
  assert.equal(got.files['vlogs/dir/c_first']?.length, 3);
  assert.equal(got.files['vlogs/dir/c_second']?.length, 3);
  assert.deepEqual(got.errors, [
    '[error] testing "PREFIX/missing" existence failed (2: No such file or directory) while logging request, client: 127.0.0.1, server: localhost, request: "GET /noroot?name=y&n=6 HTTP/1.0", host: "localhost"',
    '[crit] open() "PREFIX/vlogs/dir/c_lru" failed (2: No such file or directory) while logging request, client: 127.0.0.1, server: localhost, request: "GET /cache?name=lru HTTP/1.0", host: "localhost"',
    '[crit] open() "PREFIX/vlogs/dir/c_once" failed (2: No such file or directory) while logging request, client: 127.0.0.1, server: localhost, request: "GET /cache?name=once HTTP/1.0", host: "localhost"',
  ]);
});

test('the same files and errors as nginx', { skip: nginxSkip }, async () => {
  const [ours, theirs] = [await run(startGatehouse), await run(startNginx)];
  assert.deepEqual(ours, theirs);
});
