/**
 * The batch processor's properties the logger plugins' schemas take in
 * (apisix/utils/batch-processor.lua schema, batch-processor-manager.lua
 * wrap_schema / wrap_metadata_schema): added where the plugin does not
 * define them itself, `name` defaulting to the plugin's name.
 */
import type { Schema } from '../schema/validate.ts';

export function withBatchProperties(name: string, schema: Schema): Schema {
  const own = schema.properties as Record<string, Schema>;
  const batch: Record<string, Schema> = {
    name: { type: 'string', default: name },
    max_retry_count: { type: 'integer', minimum: 0, default: 0 },
    retry_delay: { type: 'integer', minimum: 0, default: 1 },
    buffer_duration: { type: 'integer', minimum: 1, default: 60 },
    inactive_timeout: { type: 'integer', minimum: 1, default: 5 },
    batch_max_size: { type: 'integer', minimum: 1, default: 1000 },
  };
  return { ...schema, properties: { ...batch, ...own } };
}

/** The loggers' metadata schema: `log_format`, `log_format_extra` and the backlog bound. */
export function loggerMetadataSchema(): Schema {
  return {
    type: 'object',
    properties: {
      log_format_extra: { type: 'object' },
      log_format: { type: 'object' },
      max_pending_entries: {
        type: 'integer', minimum: 1, default: 8192,
        description: 'maximum number of entries waiting to be processed; new entries are discarded while the backlog exceeds it',
      },
    },
  };
}

/** The body-logging properties every logger shares. */
export const bodyLogProperties: Record<string, Schema> = {
  log_format: { type: 'object' },
  log_format_extra: { type: 'object' },
  include_req_body: { type: 'boolean', default: false },
  include_req_body_expr: { type: 'array', minItems: 1, items: { type: 'array' } },
  include_resp_body: { type: 'boolean', default: false },
  include_resp_body_expr: { type: 'array', minItems: 1, items: { type: 'array' } },
  max_req_body_bytes: { type: 'integer', minimum: 1, default: 524288 },
  max_resp_body_bytes: { type: 'integer', minimum: 1, default: 524288 },
};

/** core.schema.uri_def: a scheme, then a host name or bracketed IPv6 address, maybe a port. */
export const uriDef: Schema = { type: 'string', pattern: '^[^\\/]+:\\/\\/([\\da-zA-Z.-]+|\\[[\\da-fA-F:]+\\])(:\\d+)?' };
