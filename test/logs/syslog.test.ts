// access_log syslog:server=…: one datagram per line with nginx's header
// (priority, time, host name, tag), compared with what Debian's nginx sends
// to the same loopback UDP listener (reference: nginx 1.22; times normalized).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as dgram from 'node:dgram';
import { startGatehouse, startNginx, nginxSkip } from '../kit/server.ts';
import { httpGet } from '../kit/client.ts';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function run(start: typeof startGatehouse): Promise<string[]> {
  const received: string[] = [];
  const udp = dgram.createSocket('udp4');
  udp.on('message', (m) => received.push(m.toString('latin1')));
  await new Promise<void>((r) => udp.bind(0, '127.0.0.1', r));
  const port = udp.address().port;
  const srv = await start({
    conf: `
events {}
http {
    log_format f '$uri $status "$http_x_test"';
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / {
            access_log syslog:server=127.0.0.1:${port} f;
            access_log syslog:server=127.0.0.1:${port},facility=local0,severity=notice,tag=gate_1,nohostname f;
            return 200;
        }
    }
}
`,
  });
  try {
    await httpGet(srv.port(8080), '/one', { 'X-Test': 'a "b"' });
    await httpGet(srv.port(8080), '/two');
    const deadline = Date.now() + 5000;
    while (received.length < 4 && Date.now() < deadline) await sleep(20);
  } finally {
    await srv.stop();
    udp.close();
  }
  return received.map((m) => m.replace(/^(<\d+>)\w{3} [ \d]\d \d\d:\d\d:\d\d /, '$1TIME ')).sort();
}

test('syslog datagrams', async () => {
  const got = await run(startGatehouse);
  const host = (await import('node:os')).hostname();
  assert.deepEqual(got, [
    `<133>TIME gate_1: /one 200 "a \\x22b\\x22"`,
    '<133>TIME gate_1: /two 200 "-"',
    `<190>TIME ${host} nginx: /one 200 "a \\x22b\\x22"`,
    `<190>TIME ${host} nginx: /two 200 "-"`,
  ]);
});

test('the same datagrams as nginx sends', { skip: nginxSkip }, async () => {
  assert.deepEqual(await run(startGatehouse), await run(startNginx));
});

/** The lines `error_log syslog:…` (the only main error log) sends, and what the default error log (-e) got. */
async function errorLogRun(start: typeof startGatehouse): Promise<{ sent: string[]; file: string[] }> {
  const received: string[] = [];
  const udp = dgram.createSocket('udp4');
  udp.on('message', (m) => received.push(m.toString('latin1')));
  await new Promise<void>((r) => udp.bind(0, '127.0.0.1', r));
  const srv = await start({
    ownErrorLog: true,
    conf: `
error_log syslog:server=127.0.0.1:${udp.address().port} error;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        location / { root %%PREFIX%%/none; }
    }
}
`,
  });
  try {
    await httpGet(srv.port(8080), '/missing');
    await srv.waitForLog('error.log', /missing" failed/, 5000);
    const deadline = Date.now() + 5000;
    while (received.length < 1 && Date.now() < deadline) await sleep(20);
    const file = srv.readFile('error.log').split('\n').filter((l) => /missing/.test(l)).map((l) => l.replace(/^.*?\[error\] \d+#\d+: /, ''));
    return { sent: received.map((m) => m.replace(/^.*?\[error\] \d+#\d+: /, '')), file };
  } finally {
    await srv.stop();
    udp.close();
  }
}

test('error logs that are all syslog leave the default error log on too, as nginx (ngx_log_open_default)', async (t) => {
  const gh = await errorLogRun(startGatehouse);
  assert.equal(gh.file.length, 1);
  assert.match(gh.file[0], /^\*\d+ open\(\) ".*\/none\/missing" failed \(2: No such file or directory\)/);
  assert.deepEqual(gh.sent, gh.file);
  if (nginxSkip) return t.skip(nginxSkip);
  const ng = await errorLogRun(startNginx);
  assert.deepEqual(ng.file.map((l) => l.replace(/gh-test-\w+/, 'P')), gh.file.map((l) => l.replace(/gh-test-\w+/, 'P')));
});
