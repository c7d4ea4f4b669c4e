// Stream sessions across a reload: a graceful reload leaves running
// sessions alone (nginx does not close them), and worker_shutdown_timeout
// ends them. Reference: both run on Debian's nginx 1.22 as well.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { flavors, startBackend, upperEcho } from './stream-kit.ts';

const conf = (echo: number, shutdownTimeout: string) => `
${shutdownTimeout}
events {}
stream {
    server { listen 127.0.0.1:%%PORT_8081%%; proxy_pass 127.0.0.1:${echo}; }
}
`;

/** A client that sends `text` and resolves with the reply (`ended` when the server closed instead). */
function opened(port: number): Promise<{ say(text: string): Promise<string>; ended: Promise<void>; close(): void }> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host: '127.0.0.1' }, () => {
      let pending: ((d: string) => void) | undefined;
      s.on('data', (d) => pending?.(d.toString('latin1')));
      const ended = new Promise<void>((r) => { s.on('close', () => r()); });
      resolve({
        say: (text) => new Promise((r) => { pending = r; s.write(text); }),
        ended,
        close: () => s.destroy(),
      });
    });
    s.on('error', reject);
  });
}

for (const flavor of flavors) {
  test(`a graceful reload keeps a stream session (${flavor.name})`, { skip: flavor.skip }, async (t) => {
    const echo = await startBackend(upperEcho);
    t.after(() => echo.close());
    const srv = await flavor.start({ conf: conf(echo.port, '') });
    t.after(() => srv.stop());
    const c = await opened(srv.port(8081));
    t.after(() => c.close());
    assert.equal(await c.say('before'), 'BEFORE');
    await srv.reload();
    // the old configuration's session still relays both ways
    assert.equal(await c.say('after'), 'AFTER');
    // and new connections are served by the new one
    const d = await opened(srv.port(8081));
    t.after(() => d.close());
    assert.equal(await d.say('new'), 'NEW');
  });

  test(`worker_shutdown_timeout ends a stream session after a reload (${flavor.name})`, { skip: flavor.skip }, async (t) => {
    const echo = await startBackend(upperEcho);
    t.after(() => echo.close());
    const srv = await flavor.start({ conf: conf(echo.port, 'worker_shutdown_timeout 100ms;') });
    t.after(() => srv.stop());
    const c = await opened(srv.port(8081));
    t.after(() => c.close());
    assert.equal(await c.say('x'), 'X');
    await srv.reload();
    await c.ended;
    assert.ok(true, 'the session was closed');
  });
}
