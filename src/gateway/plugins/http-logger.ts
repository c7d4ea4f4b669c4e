/**
 * http-logger (apisix/plugins/http-logger.lua): schema and metadata schema
 * only. The Admin API checks and stores its confs and metadata; the data
 * plane serves the request and does not send its log entry; the error
 * log says so once per route (not-implemented.ts).
 */
import type { GatewayPlugin } from './registry.ts';
import { bodyLogProperties, loggerMetadataSchema, withBatchProperties } from './batch-schema.ts';
import { logsNotSent } from './not-implemented.ts';

export const httpLogger: GatewayPlugin = {
  name: 'http-logger', version: 0.1, priority: 410,
  schema: withBatchProperties('http-logger', {
    type: 'object',
    properties: {
      uri: { type: 'string', pattern: '^[^\\/]+:\\/\\/([\\da-zA-Z.-]+|\\[[\\da-fA-F:]+\\])(:\\d+)?' },
      auth_header: { type: 'string' },
      timeout: { type: 'integer', minimum: 1, default: 3 },
      ...bodyLogProperties,
      concat_method: { type: 'string', default: 'json', enum: ['json', 'new_line'] },
      ssl_verify: { type: 'boolean', default: false },
    },
    required: ['uri'],
  }),
  metadataSchema: loggerMetadataSchema(),
  encryptFields: ['auth_header'],
  ...logsNotSent('http-logger'),
};
