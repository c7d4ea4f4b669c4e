/**
 * udp-logger (apisix/plugins/udp-logger.lua): schema and metadata schema
 * only. The Admin API checks and stores its confs and metadata; the data
 * plane does not send logs, and refuses a request that would run it
 * (not-implemented.ts).
 */
import type { GatewayPlugin } from './registry.ts';
import { bodyLogProperties, loggerMetadataSchema, withBatchProperties } from './batch-schema.ts';
import { notImplemented } from './not-implemented.ts';

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
  ...notImplemented('udp-logger'),
};
