/**
 * A logger's entries still buffered when the gateway stops gracefully are
 * sent before the worker exits, and a batch waiting for its retry_delay is
 * retried at once (APISIX's batch processor runs its timers premature at
 * worker exit). The batches here would wait 60 s for their timers: only the
 * flush at exit can deliver them by the time QUIT has ended the process.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { startGateway } from './harness.ts';
import { put, startOrigin, untilRouted } from './dataplane-kit.ts';

test('QUIT sends what the loggers hold, retries included, before the gateway exits', async (t) => {
  const got: Array<{ path: string; body: string }> = [];
  /** How many times /retry answers 500 before it answers 200. */
  let failures = 1;
  let arrived = () => undefined as void;
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const p = (req.url ?? '').split('?')[0];
      got.push({ path: p, body: Buffer.concat(chunks).toString() });
      res.statusCode = p === '/retry' && failures-- > 0 ? 500 : 200;
      res.end();
      arrived();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => receiver.close(resolve)));
  const uri = (p: string) => `http://127.0.0.1:${(receiver.address() as AddressInfo).port}${p}`;

  const [gw, origin] = await Promise.all([startGateway(), startOrigin()]);
  t.after(() => Promise.all([gw.stop(), origin.close()]));
  const upstream = { type: 'roundrobin', nodes: { [origin.node]: 1 } };
  const slow = { batch_max_size: 100, inactive_timeout: 60, buffer_duration: 60 };
  await put(gw, 'routes/held', { uri: '/held', upstream, plugins: { 'http-logger': { uri: uri('/held'), ...slow } } });
  await put(gw, 'routes/retry', { uri: '/retry', upstream, plugins: { 'http-logger': { uri: uri('/retry'), batch_max_size: 1, max_retry_count: 1, retry_delay: 60 } } });
  await untilRouted(gw, '/held?n=1', (r) => r.status === 200);
  await untilRouted(gw, '/retry', (r) => r.status === 200);
  // the retry's first attempt has been answered 500 before QUIT
  while (!got.some((g) => g.path === '/retry')) await new Promise<void>((r) => { arrived = r; });

  await gw.stop();
  assert.equal(await gw.exited, 0);
  const held = got.filter((g) => g.path === '/held');
  assert.equal(held.length, 1, 'the buffered batch was sent at exit');
  assert.deepEqual((JSON.parse(held[0].body) as Array<{ request: { uri: string } }>).map((e) => e.request.uri), ['/held?n=1']);
  assert.equal(got.filter((g) => g.path === '/retry').length, 2, 'the batch waiting for its retry was sent again at exit');
});
