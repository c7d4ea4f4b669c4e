/**
 * tcp-logger (apisix/plugins/tcp-logger.lua): each request's log entry
 * (log-entry.ts) is batched (batch-processor.ts) and written on a TCP
 * connection of its own to `host`:`port`, TLS with `tls` (the server's
 * certificate not verified, as APISIX's handshake; `tls_options` names the
 * SNI), then closed: a JSON object for a batch of one, else a JSON array,
 * with nothing after it. `timeout` is in milliseconds, as APISIX's.
 */
import net from 'node:net';
import tls from 'node:tls';
import type { GatewayPlugin } from './registry.ts';
import { bodyLogProperties, loggerMetadataSchema, withBatchProperties } from './batch-schema.ts';
import { BatchProcessorManager, batchJson } from './batch-processor.ts';
import type { BatchConf } from './batch-processor.ts';
import { bodyLogPhases, logEntry } from './log-entry.ts';
import type { BodyLogConf } from './log-entry.ts';

interface TcpLoggerConf extends BatchConf, BodyLogConf { host: string; port: number; tls: boolean; tls_options?: string; timeout: number }

const manager = new BatchProcessorManager('tcp-logger');

/** send_tcp_data: connect (and handshake), write the batch, close. */
function sendStream(conf: TcpLoggerConf, message: string): Promise<void> {
  const where = `host[${conf.host}] port[${conf.port}]`;
  return new Promise((resolve, reject) => {
    let connected = false;
    const onReady = () => {
      connected = true;
      socket.end(message, () => resolve());
    };
    const socket: net.Socket = conf.tls
      ? tls.connect({ host: conf.host, port: conf.port, servername: conf.tls_options ?? (net.isIP(conf.host) ? undefined : conf.host), rejectUnauthorized: false }, onReady)
      : net.connect({ host: conf.host, port: conf.port }, onReady);
    socket.setTimeout(conf.timeout, () => socket.destroy(new Error('timeout')));
    socket.on('error', (e) => {
      const what = !connected ? (conf.tls ? 'failed to perform TLS handshake to TCP server' : 'failed to connect to TCP server') : 'failed to send data to TCP server';
      reject(new Error(`${what}: ${where} err: ${e.message}`));
    });
    socket.on('close', () => resolve());
    // what the server writes back is not read
    socket.resume();
  });
}

export const tcpLogger: GatewayPlugin<TcpLoggerConf> = {
  name: 'tcp-logger', version: 0.1, priority: 405,
  schema: withBatchProperties('tcp logger', {
    type: 'object',
    properties: {
      host: { type: 'string' },
      port: { type: 'integer', minimum: 0 },
      tls: { type: 'boolean', default: false },
      tls_options: { type: 'string' },
      timeout: { type: 'integer', minimum: 1, default: 1000 },
      ...bodyLogProperties,
    },
    required: ['host', 'port'],
  }),
  metadataSchema: loggerMetadataSchema(),
  ...bodyLogPhases<TcpLoggerConf>(),
  log(conf, ctx) {
    const entry = logEntry('tcp-logger', conf, ctx);
    if (entry) manager.add(conf, ctx, entry, (entries, size) => sendStream(conf, batchJson(entries, size)));
  },
};
