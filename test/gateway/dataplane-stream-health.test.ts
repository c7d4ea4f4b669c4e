/**
 * Health checks of a stream route's upstream: an active TCP check leaves a
 * node that went down out of the balancing (with retries 0 no connection
 * fails any more), as for HTTP upstreams.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { freePorts } from '../kit/server.ts';
import { defaultYaml, startGateway } from './harness.ts';
import type { Gateway } from './harness.ts';
import { put } from './dataplane-kit.ts';

let gw: Gateway;
let streamPort: number;

before(async () => {
  [streamPort] = await freePorts(1);
  const yaml = defaultYaml(2).replace('nginx_config:', ['  proxy_mode: http&stream', '  stream_proxy:', '    tcp:', `      - 127.0.0.1:${streamPort}`, 'nginx_config:'].join('\n'));
  gw = await startGateway({ yaml });
});
after(async () => { await gw.stop(); });

async function tcpEcho(name: string): Promise<{ node: string; close(): void }> {
  const socks = new Set<net.Socket>();
  const server = net.createServer((sock) => {
    socks.add(sock);
    sock.on('data', (c: Buffer) => sock.write(`${name}:${c.toString()}`));
    sock.on('error', () => {});
    sock.on('close', () => socks.delete(sock));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { node: `127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => { server.close(); for (const s of socks) s.destroy(); } };
}

/** One connection through the stream port: the echo, or '' when it was closed without one. */
function say(text: string): Promise<string> {
  return new Promise((resolve) => {
    const sock = net.connect(streamPort, '127.0.0.1', () => sock.write(text));
    let got = '';
    sock.on('data', (c: Buffer) => { got += c.toString(); if (got.length > text.length) sock.end(); });
    sock.on('error', () => {});
    sock.on('close', () => resolve(got));
    sock.setTimeout(2000, () => sock.destroy());
  });
}

describe('stream upstream health checks', () => {
  it('a node that goes down is left out; the connections all reach the other', async () => {
    const a = await tcpEcho('A');
    const b = await tcpEcho('B');
    try {
      await put(gw, 'stream_routes/sh', { server_port: streamPort, upstream: { type: 'roundrobin', retries: 0, nodes: { [a.node]: 1, [b.node]: 1 },
        checks: { active: { type: 'tcp', healthy: { interval: 1, successes: 1 }, unhealthy: { interval: 1, tcp_failures: 1 } } } } });
      let deadline = Date.now() + 10_000;
      while ((await say('x')) !== 'B:x') {
        if (Date.now() > deadline) throw new Error('B never answered');
        await sleep(10);
      }
      b.close();
      deadline = Date.now() + 15_000;
      let run = 0;
      while (run < 10) {
        run = (await say('y')) === 'A:y' ? run + 1 : 0;
        assert.ok(Date.now() < deadline, 'connections kept failing');
      }
    } finally {
      a.close();
      b.close();
    }
  });
});
