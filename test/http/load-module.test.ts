/**
 * `load_module` with a module file of ours (test/modules/peer-choice-module.ts):
 * the module's directives, phase handler, body filter and per-try peer choice work in the
 * workers (over real sockets) and again after a reload, without any engine
 * file knowing about it; `-t` reads it; a missing file, a second load and a
 * late load_module get nginx's messages (the missing file's compared with
 * Debian's nginx on the same configuration).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseResponse, rawRequest } from '../kit/client.ts';
import { gatehouseBinary, nginxBinary, nginxSkip, startGatehouse } from '../kit/server.ts';
import { normalize, runCli, tempDir } from '../cli/run-cli.ts';
import { HTTP_COMMON, RawUpstream, replyWith, response } from '../proxy/upstream-kit.ts';

const MODULE = fileURLToPath(new URL('../modules/peer-choice-module.ts', import.meta.url));

const conf = (livePort: number) => `
load_module ${MODULE};
worker_processes 2;
events {}
http {
${HTTP_COMMON}
    log_format choice '$uri $status "$upstream_addr" "$upstream_status" "$peer_choice_log"';
    access_log %%PREFIX%%/choice.log choice;
    upstream dead_first {
        server 127.0.0.1:%%PORT_8082%%;
        peer_choice_upstream_fallback ${livePort};
    }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        # nothing listens on 8082: the first try fails to connect
        location /chosen/ {
            peer_choice_fallback ${livePort};
            proxy_pass http://127.0.0.1:%%PORT_8082%%;
        }
        location /group/ {
            proxy_pass http://dead_first;
        }
        location /plain/ {
            proxy_pass http://127.0.0.1:${livePort};
        }
        location /footer/ {
            peer_choice_footer " -- footer";
            proxy_pass http://127.0.0.1:${livePort};
        }
    }
}
`;

async function get(port: number, uri: string) {
  return parseResponse(await rawRequest(port, `GET ${uri} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`));
}

test('a loaded module adds a directive, a phase handler and a per-try peer choice; it survives a reload', async (t) => {
  const origins = [await RawUpstream.start(replyWith(response('from origin A'))), await RawUpstream.start(replyWith(response('from origin B')))];
  t.after(() => Promise.all(origins.map((o) => o.close())));
  const srv = await startGatehouse({ conf: conf(origins[0].port) });
  t.after(() => srv.stop());
  const dead = srv.port(8082);

  const r = await get(srv.port(8080), '/chosen/x?a=1');
  assert.equal(r.status, 200);
  assert.equal(r.body.toString(), 'from origin A');
  // the origin got the request once, as proxy_pass made it (the chooser only picked where it went)
  assert.equal(origins[0].requests.length, 1);
  assert.match(origins[0].requests[0].head, /^GET \/chosen\/x\?a=1 HTTP\/1\.0\r\nHost: 127\.0\.0\.1:\d+\r\n/);
  const line = await srv.waitForLog('choice.log', /^\/chosen\/x /m);
  assert.equal(line, `/chosen/x 200 "127.0.0.1:${dead}, 127.0.0.1:${origins[0].port}" "502, 200" `
    + '"get(none,0) free(failed) get(error,502) free(ok)"');
  assert.match(srv.readFile('error.log'), /\[error\] .*connect\(\) failed \(111: Connection refused\) while connecting to upstream/);

  // the same choice installed on an upstream {} group by a directive inside it
  const viaGroup = await get(srv.port(8080), '/group/w');
  assert.equal(viaGroup.body.toString(), 'from origin A');
  assert.equal(await srv.waitForLog('choice.log', /^\/group\/w /m),
    `/group/w 200 "127.0.0.1:${dead}, 127.0.0.1:${origins[0].port}" "502, 200" "get(none,0) free(failed) get(error,502) free(ok)"`);

  // a location without the directive keeps the default chooser (and the module's variable is empty)
  const plain = await get(srv.port(8080), '/plain/y');
  assert.equal(plain.body.toString(), 'from origin A');
  assert.equal(await srv.waitForLog('choice.log', /^\/plain\/y /m), `/plain/y 200 "127.0.0.1:${origins[0].port}" "200" "-"`);

  // the module's body filter appends its footer at the end of the body, which then goes out chunked
  const footed = await get(srv.port(8080), '/footer/f');
  assert.equal(footed.status, 200);
  assert.equal(footed.body.toString(), 'from origin A -- footer');
  assert.equal(footed.header('content-length'), undefined);
  assert.equal(footed.header('transfer-encoding'), 'chunked');

  // after a reload the module is there again, in the new workers, with the new configuration
  srv.writeConf(conf(origins[1].port));
  assert.doesNotMatch(await srv.reload(), /\[emerg\]/);
  const again = await get(srv.port(8080), '/chosen/z');
  assert.equal(again.body.toString(), 'from origin B');
  assert.equal(await srv.waitForLog('choice.log', /^\/chosen\/z /m),
    `/chosen/z 200 "127.0.0.1:${dead}, 127.0.0.1:${origins[1].port}" "502, 200" "get(none,0) free(failed) get(error,502) free(ok)"`);
});

/** A private prefix with `nginx.conf`; returns the -p/-c/-e/-g arguments for -t. */
function setup(text: string) {
  const d = tempDir();
  fs.writeFileSync(path.join(d.dir, 'nginx.conf'), text);
  return { ...d, args: ['-p', `${d.dir}/`, '-c', 'nginx.conf', '-e', `${d.dir}/e.log`, '-g', `pid ${d.dir}/x.pid;`] };
}

test('-t reads a loaded module\'s directives', async (t) => {
  const s = setup(`load_module ${MODULE};\nevents {}\nhttp { access_log off; server { location / { peer_choice_fallback 9; proxy_pass http://127.0.0.1:1; } } }\n`);
  t.after(s.cleanup);
  const r = await runCli(gatehouseBinary, ['-t', ...s.args]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /syntax is ok/);
  // without load_module the directive is unknown
  fs.writeFileSync(path.join(s.dir, 'nginx.conf'), 'events {}\nhttp { server { location / { peer_choice_fallback 9; } } }\n');
  const without = await runCli(gatehouseBinary, ['-t', ...s.args]);
  assert.equal(without.code, 1);
  assert.match(without.stderr, /unknown directive "peer_choice_fallback" in .*nginx\.conf:2/);
});

test('a missing module file: nginx\'s dlopen() message, relative to the prefix', { skip: nginxSkip }, async (t) => {
  for (const name of ['modules/missing.ts', '/nonexistent/missing.ts']) {
    const s = setup(`worker_processes 1;\nload_module ${name};\nevents {}\n`);
    t.after(s.cleanup);
    const [ours, theirs] = await Promise.all([runCli(gatehouseBinary, ['-t', ...s.args]), runCli(nginxBinary, ['-t', ...s.args])]);
    assert.equal(ours.code, 1);
    assert.equal(normalize(ours.stderr, s.dir), normalize(theirs.stderr, s.dir), name);
    const full = name.startsWith('/') ? name : `${s.dir}/${name}`;
    assert.match(ours.stderr, new RegExp(`dlopen\\(\\) "${full}" failed \\(${full}: cannot open shared object file: No such file or directory\\) in .*nginx\\.conf:2`));
  }
});

test('load_module twice, or after a block: nginx\'s messages', async (t) => {
  const twice = setup(`load_module ${MODULE};\nload_module ${MODULE};\nevents {}\n`);
  t.after(twice.cleanup);
  const r = await runCli(gatehouseBinary, ['-t', ...twice.args]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /\[emerg\] module "ngx_http_peer_choice_test_module" is already loaded in .*nginx\.conf:2/);
  const late = setup(`events {}\nload_module ${MODULE};\n`);
  t.after(late.cleanup);
  const l = await runCli(gatehouseBinary, ['-t', ...late.args]);
  assert.equal(l.code, 1);
  assert.match(l.stderr, /\[emerg\] "load_module" directive is specified too late in .*nginx\.conf:2/);
});
