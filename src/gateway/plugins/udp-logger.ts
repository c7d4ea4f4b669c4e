/**
 * udp-logger (apisix/plugins/udp-logger.lua): schema and metadata schema
 * only. The Admin API checks and stores its confs and metadata; the data
 * plane serves the request and does not send its log entry; the error
 * log says so once per route (not-implemented.ts).
 */
import type { GatewayPlugin } from './registry.ts';
import { bodyLogProperties, loggerMetadataSchema, withBatchProperties } from './batch-schema.ts';
import { logsNotSent } from './not-implemented.ts';

export const udpLogger: GatewayPlugin = {
  name: 'udp-logger', version: 0.1, priority: 400,
  schema: withBatchProperties('udp-logger', {
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
  ...logsNotSent('udp-logger'),
};
