/**
 * splunk-hec-logging (apisix/plugins/splunk-hec-logging.lua): each request
 * becomes a Splunk HEC event (time in seconds, source, sourcetype _json,
 * host, and as `event` a fixed subset of the log entry, or the whole entry
 * made by a log_format), batched and POSTed to `endpoint.uri` as the
 * events' JSON documents back to back, with `Authorization: Splunk <token>`
 * and `endpoint.channel` as X-Splunk-Request-Channel. `endpoint.timeout` is
 * in seconds; any status but 200 fails the batch. Bodies are not logged.
 */
import os from 'node:os';
import type { GatewayPlugin } from './registry.ts';
import { loggerMetadataSchema, uriDef, withBatchProperties } from './batch-schema.ts';
import { BatchProcessorManager } from './batch-processor.ts';
import type { BatchConf } from './batch-processor.ts';
import { logEntryParts } from './log-entry.ts';
import type { BodyLogConf, LogEntry } from './log-entry.ts';
import { logRequest } from './log-http.ts';

interface SplunkConf extends BatchConf, BodyLogConf {
  endpoint: { uri: string; token: string; channel?: string; timeout: number; keepalive_timeout: number };
  ssl_verify: boolean;
}

const manager = new BatchProcessorManager('splunk-hec-logging');

/** get_logger_entry: the HEC event of a request. */
function hecEvent(conf: SplunkConf, ctx: Parameters<NonNullable<GatewayPlugin<SplunkConf>['log']>>[1]): LogEntry | undefined {
  const parts = logEntryParts('splunk-hec-logging', conf, ctx);
  if (!parts) return undefined;
  const { entry: e, customized, extra } = parts;
  const base = { time: Date.now() / 1000, source: 'apache-apisix-splunk-hec-logging', sourcetype: '_json' };
  if (customized) return { ...base, host: os.hostname(), event: e };
  const req = e.request as LogEntry;
  const res = e.response as LogEntry;
  const event: LogEntry = {
    request_url: req.url, request_method: req.method, request_headers: req.headers, request_query: req.querystring,
    request_size: req.size, response_headers: res.headers, response_status: res.status, response_size: res.size,
    latency: e.latency, upstream: e.upstream,
  };
  // log_format_extra's keys join the event, never over its own
  for (const [k, v] of Object.entries(extra ?? {})) if (event[k] === undefined) event[k] = v;
  return { ...base, host: (e.server as LogEntry).hostname, event };
}

async function send(conf: SplunkConf, events: unknown[]): Promise<void> {
  const { endpoint } = conf;
  let reply;
  try {
    reply = await logRequest(endpoint.uri, {
      method: 'POST', timeoutMs: endpoint.timeout * 1000, sslVerify: conf.ssl_verify, body: events.map((e) => JSON.stringify(e)).join(''),
      headers: {
        'Content-Type': 'application/json',
        Authorization: `Splunk ${endpoint.token}`,
        ...(endpoint.channel !== undefined ? { 'X-Splunk-Request-Channel': endpoint.channel } : {}),
      },
    });
  } catch (e) {
    throw new Error(`failed to write log to splunk, ${(e as Error).message}`);
  }
  if (reply.status === 200) return;
  let text: unknown;
  try {
    text = (JSON.parse(reply.body) as { text?: unknown }).text;
  } catch {
    throw new Error(`failed to send splunk, http status code: ${reply.status}`);
  }
  throw new Error(`failed to send splunk, ${String(text)}`);
}

export const splunkHecLogging: GatewayPlugin<SplunkConf> = {
  name: 'splunk-hec-logging', version: 0.1, priority: 409,
  schema: withBatchProperties('splunk-hec-logging', {
    type: 'object',
    properties: {
      endpoint: {
        type: 'object',
        properties: {
          uri: uriDef,
          token: { type: 'string' },
          channel: { type: 'string' },
          timeout: { type: 'integer', minimum: 1, default: 10 },
          keepalive_timeout: { type: 'integer', minimum: 1000, default: 60000, description: 'keepalive timeout in milliseconds' },
        },
        required: ['uri', 'token'],
      },
      ssl_verify: { type: 'boolean', default: true },
      log_format: { type: 'object' },
      log_format_extra: { type: 'object' },
    },
    required: ['endpoint'],
  }),
  metadataSchema: loggerMetadataSchema(),
  encryptFields: ['endpoint.token'],
  log(conf, ctx) {
    const event = hecEvent(conf, ctx);
    if (event) manager.add(conf, ctx, event, (events) => send(conf, events));
  },
};
