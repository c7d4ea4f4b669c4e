/**
 * udp-logger (apisix/plugins/udp-logger.lua): each request's log entry
 * (log-entry.ts) is batched (batch-processor.ts) and sent to `host`:`port`
 * as one datagram a batch: a JSON object for a batch of one, else a JSON
 * array. Nothing comes back over UDP, so only a send that fails (or takes
 * longer than `timeout` seconds) is retried.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import type { GatewayPlugin } from './registry.ts';
import { bodyLogProperties, loggerMetadataSchema, withBatchProperties } from './batch-schema.ts';
import { BatchProcessorManager, batchJson } from './batch-processor.ts';
import type { BatchConf } from './batch-processor.ts';
import { bodyLogPhases, logEntry } from './log-entry.ts';
import type { BodyLogConf } from './log-entry.ts';

interface UdpLoggerConf extends BatchConf, BodyLogConf { host: string; port: number; timeout: number }

const manager = new BatchProcessorManager('udp-logger');

/** send_udp_data: a socket of its own for the datagram, closed after it. */
function sendDatagram(conf: UdpLoggerConf, message: string): Promise<void> {
  const where = `host[${conf.host}] port[${conf.port}]`;
  const socket = dgram.createSocket(net.isIPv6(conf.host) ? 'udp6' : 'udp4');
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`failed to send data to UDP server: ${where} err:timeout`)), conf.timeout * 1000);
    socket.on('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`failed to send data to UDP server: ${where} err:${e.message}`));
    });
    socket.send(message, conf.port, conf.host, (e) => {
      clearTimeout(timer);
      if (e) reject(new Error(`failed to send data to UDP server: ${where} err:${e.message}`));
      else resolve();
    });
  }).finally(() => socket.close());
}

export const udpLogger: GatewayPlugin<UdpLoggerConf> = {
  name: 'udp-logger', version: 0.1, priority: 400,
  schema: withBatchProperties('udp logger', {
    type: 'object',
    properties: {
      host: { type: 'string' },
      port: { type: 'integer', minimum: 0 },
      timeout: { type: 'integer', minimum: 1, default: 3 },
      ...bodyLogProperties,
    },
    required: ['host', 'port'],
  }),
  metadataSchema: loggerMetadataSchema(),
  ...bodyLogPhases<UdpLoggerConf>(),
  log(conf, ctx) {
    const entry = logEntry('udp-logger', conf, ctx);
    if (entry) manager.add(conf, ctx, entry, (entries, size) => sendDatagram(conf, batchJson(entries, size)));
  },
};
