/**
 * http-logger (apisix/plugins/http-logger.lua): each request's log entry
 * (log-entry.ts) is batched (batch-processor.ts) and POSTed to `uri`, http
 * or https (`ssl_verify`), as a JSON object for a batch of one, else a JSON
 * array, or with `concat_method: new_line` one JSON document a line;
 * `auth_header` is the Authorization header, `timeout` bounds the whole
 * exchange. A status of 400 or more is a failure the processor retries.
 */
import type { GatewayPlugin } from './registry.ts';
import { bodyLogProperties, loggerMetadataSchema, withBatchProperties } from './batch-schema.ts';
import { BatchProcessorManager, batchJson } from './batch-processor.ts';
import type { BatchConf } from './batch-processor.ts';
import { bodyLogPhases, checkLogConf, logEntry } from './log-entry.ts';
import type { BodyLogConf } from './log-entry.ts';
import { postOrFail } from './log-http.ts';
import { serverOf } from './http-call.ts';

interface HttpLoggerConf extends BatchConf, BodyLogConf {
  uri: string;
  auth_header?: string;
  timeout: number;
  concat_method: 'json' | 'new_line';
  ssl_verify: boolean;
}

const manager = new BatchProcessorManager('http-logger');

/** The batch's body: json (an object for a batch of one, else an array) or new_line. */
function encode(conf: HttpLoggerConf, entries: unknown[], batchMaxSize: number): string {
  if (conf.concat_method === 'new_line' && batchMaxSize !== 1) return entries.map((e) => JSON.stringify(e)).join('\n');
  return batchJson(entries, batchMaxSize);
}

/** send_http_data: one POST on a connection of its own. */
function post(conf: HttpLoggerConf, body: string): Promise<void> {
  return postOrFail(conf.uri, {
    method: 'POST', timeoutMs: conf.timeout * 1000, sslVerify: conf.ssl_verify, body,
    headers: {
      // as lua-resty-http is asked: the URI's host without its port
      Host: serverOf(conf.uri).host,
      'Content-Type': conf.concat_method === 'json' ? 'application/json' : 'text/plain',
      ...(conf.auth_header !== undefined ? { Authorization: conf.auth_header } : {}),
    },
  });
}

export const httpLogger: GatewayPlugin<HttpLoggerConf> = {
  name: 'http-logger', version: 0.1, priority: 410,
  schema: withBatchProperties('http logger', {
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
  checkConf: checkLogConf,
  ...bodyLogPhases<HttpLoggerConf>(),
  log(conf, ctx) {
    const entry = logEntry('http-logger', conf, ctx);
    if (!entry) return;
    if (entry.route_id === undefined) entry.route_id = 'no-matched';
    manager.add(conf, ctx, entry, (entries, size) => post(conf, encode(conf, entries, size)));
  },
};
