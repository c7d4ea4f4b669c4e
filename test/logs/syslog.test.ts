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
