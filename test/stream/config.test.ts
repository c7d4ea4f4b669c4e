// stream {} configurations that nginx refuses (and a few it accepts), checked
// with `-t`: Gatehouse must print what Debian's nginx 1.22 prints (the
// reference, run on the same file with its dynamic stream module loaded).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { gatehouseBinary, nginxBinary, nginxModulesDir, nginxSkip } from '../kit/server.ts';
import { normalize, runCli, tempDir } from '../cli/run-cli.ts';

/** Every case loads the stream module, as a Debian nginx.conf does; Gatehouse has it built in. */
const head = `load_module ${nginxModulesDir}/ngx_stream_module.so;\nevents {}\n`;

/** `newer`: nginx ≥ 1.25.5 accepts what 1.22 refuses (virtual servers); Gatehouse follows the newer one, so 1.22 is not asked. */
const cases: Array<{ name: string; stream: string; expect: string; newer?: boolean }> = [
  { name: 'a server without listen', stream: 'server { proxy_pass 127.0.0.1:1; }', expect: 'no "listen" is defined for server in DIR/nginx.conf:4' },
  { name: 'a server without a handler (nginx ≥ 1.25.5)', stream: 'server { listen 127.0.0.1:1; }', expect: 'syntax is ok', newer: true },
  {
    name: 'two servers on one address (nginx ≥ 1.25.5: virtual servers)',
    stream: 'server { listen 127.0.0.1:1; return x; }\nserver { listen 127.0.0.1:1; server_name y; return y; }',
    expect: 'syntax is ok', newer: true,
  },
  {
    name: 'one server listing an address twice',
    stream: 'server { listen 127.0.0.1:1; listen 127.0.0.1:1; return x; }',
    expect: 'duplicate "127.0.0.1:1" address and port pair in DIR/nginx.conf:4',
  },
  { name: 'an unknown listen parameter', stream: 'server { listen 127.0.0.1:1 foo; return x; }', expect: 'the invalid "foo" parameter in DIR/nginx.conf:4' },
  { name: 'a listen port out of range', stream: 'server { listen 127.0.0.1:70000; return x; }', expect: 'invalid port in "127.0.0.1:70000" of the "listen" directive in DIR/nginx.conf:4' },
  { name: 'an empty upstream', stream: 'upstream u { }', expect: 'no servers are inside upstream in DIR/nginx.conf:4' },
  { name: 'an upstream server without port', stream: 'upstream u { server 127.0.0.1; }', expect: 'no port in upstream "127.0.0.1" in DIR/nginx.conf:4' },
  { name: 'weight=0', stream: 'upstream u { server 127.0.0.1:1 weight=0; }', expect: 'invalid parameter "weight=0" in DIR/nginx.conf:4' },
  { name: 'only backup servers', stream: 'upstream u { server 127.0.0.1:1 backup; }\nserver { listen 127.0.0.1:2; proxy_pass u; }', expect: 'no servers in upstream "u" in DIR/nginx.conf:4' },
  { name: 'proxy_pass twice', stream: 'server { listen 127.0.0.1:1; proxy_pass 127.0.0.1:2; proxy_pass 127.0.0.1:3; }', expect: '"proxy_pass" directive is duplicate in DIR/nginx.conf:4' },
  { name: 'proxy_pass without port', stream: 'server { listen 127.0.0.1:1; proxy_pass 127.0.0.1; }', expect: 'no port in upstream "127.0.0.1" in DIR/nginx.conf:4' },
  {
    name: 'a port on an upstream block name',
    stream: 'upstream u { server 127.0.0.1:1; }\nserver { listen 127.0.0.1:2; proxy_pass u:80; }',
    expect: 'upstream "u" may not have port 80 in DIR/nginx.conf:5',
  },
  { name: 'an unknown log format', stream: 'server { listen 127.0.0.1:1; return x; access_log x.log nope; }', expect: 'unknown log format "nope" in DIR/nginx.conf:4' },
  { name: 'access_log without format', stream: 'server { listen 127.0.0.1:1; return x; access_log x.log; }', expect: 'log format is not specified in DIR/nginx.conf:4' },
  { name: 'an unknown variable', stream: 'server { listen 127.0.0.1:1; return $nope; }', expect: 'unknown "nope" variable' },
  { name: 'a bad time', stream: 'proxy_timeout abc;\nserver { listen 127.0.0.1:1; return x; }', expect: '"proxy_timeout" directive invalid value in DIR/nginx.conf:4' },
  { name: 'a bad rate', stream: 'proxy_upload_rate abc;\nserver { listen 127.0.0.1:1; return x; }', expect: '"proxy_upload_rate" directive invalid value in DIR/nginx.conf:4' },
  { name: 'a bad flag', stream: 'tcp_nodelay maybe;\nserver { listen 127.0.0.1:1; return x; }', expect: 'invalid value "maybe" in "tcp_nodelay" directive, it must be "on" or "off" in DIR/nginx.conf:4' },
  { name: 'a bad allow', stream: 'server { listen 127.0.0.1:1; return x; allow 300.0.0.1; }', expect: 'invalid parameter "300.0.0.1" in DIR/nginx.conf:4' },
  { name: 'proxy_pass at stream level', stream: 'proxy_pass 127.0.0.1:1;', expect: '"proxy_pass" directive is not allowed here in DIR/nginx.conf:4' },
  {
    name: 'a valid configuration',
    stream: [
      'log_format s "$remote_addr $status $upstream_addr";',
      'map $server_port $to { default 127.0.0.1:3; }',
      'upstream u { server 127.0.0.1:1 weight=2 max_fails=3 fail_timeout=5s; server 127.0.0.1:2 backup; server 127.0.0.1:4 down; }',
      'server { listen 127.0.0.1:5; proxy_pass u; access_log s.log s; proxy_half_close on; proxy_next_upstream_tries 2; deny 127.0.0.2; }',
      'server { listen 127.0.0.1:6; proxy_pass $to; proxy_download_rate 1k; proxy_bind 127.0.0.1; tcp_nodelay off; }',
    ].join('\n'),
    expect: 'syntax is ok',
  },
];

async function check(binary: string, conf: string): Promise<{ code: number | null; output: string }> {
  const { dir, cleanup } = tempDir();
  try {
    fs.writeFileSync(path.join(dir, 'nginx.conf'), conf);
    const r = await runCli(binary, ['-t', '-p', `${dir}/`, '-c', 'nginx.conf', '-e', 'error.log', '-g', `pid ${dir}/nginx.pid;`]);
    return { code: r.code, output: normalize(r.stderr, dir).replace(/configuration file \S+/g, 'configuration file CONF') };
  } finally {
    cleanup();
  }
}

for (const c of cases) {
  test(`-t: ${c.name}`, async () => {
    const conf = `${head}stream {\n${c.stream}\n}\n`;
    const g = await check(gatehouseBinary, conf);
    assert.ok(g.output.includes(c.expect), g.output);
    assert.equal(g.code, c.expect === 'syntax is ok' ? 0 : 1);
    if (nginxSkip || c.newer) return;
    const n = await check(nginxBinary, conf);
    assert.deepEqual(g, n);
  });
}
