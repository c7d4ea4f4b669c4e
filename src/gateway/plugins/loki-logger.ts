/**
 * loki-logger (apisix/plugins/loki-logger.lua): each request's log entry is
 * batched and POSTed to one of `endpoint_addrs` (at random) + `endpoint_uri`
 * as Loki's push JSON: the batch's entries grouped into streams by their
 * labels (`log_labels`, `$vars` resolved per request), each value
 * [start time in ns as a string, the entry as a JSON line]. `tenant_id` is
 * X-Scope-OrgID; `timeout` is in milliseconds. A status of 300 or more fails.
 */
import type { GatewayPlugin } from './registry.ts';
import { bodyLogProperties, loggerMetadataSchema, uriDef, withBatchProperties } from './batch-schema.ts';
import { BatchProcessorManager } from './batch-processor.ts';
import type { BatchConf } from './batch-processor.ts';
import { bodyLogPhases, checkLogConf, logEntry } from './log-entry.ts';
import type { BodyLogConf, LogEntry } from './log-entry.ts';
import { logRequest, pickEndpoint } from './log-http.ts';
import { resolveVar } from './resolve-var.ts';

interface LokiConf extends BatchConf, BodyLogConf {
  endpoint_addrs: string[];
  endpoint_uri: string;
  tenant_id: string;
  headers?: Record<string, string>;
  log_labels: Record<string, string>;
  ssl_verify: boolean;
  timeout: number;
  keepalive: boolean;
  keepalive_timeout: number;
  keepalive_pool: number;
}

/** What the batch holds: the entry and, beside it (never in the line), its labels and time. */
interface Pending { entry: LogEntry; labels: Record<string, string>; time: string }

const manager = new BatchProcessorManager('loki-logger');

const nonEmptyStrings = { type: 'object', patternProperties: { '.*': { type: 'string', minLength: 1 } } };

/** The streams of a batch, in the order their label sets first appear. */
function pushBody(batch: Pending[]): string {
  const streams: Array<{ stream: Record<string, string>; values: string[][] }> = [];
  const byKey = new Map<string, (typeof streams)[number]>();
  for (const p of batch) {
    // sorted k=v pairs joined by NUL: equal label sets, one stream
    const key = Object.keys(p.labels).sort().map((k) => `${k}=${p.labels[k]}`).join('\0');
    let s = byKey.get(key);
    if (!s) {
      s = { stream: p.labels, values: [] };
      byKey.set(key, s);
      streams.push(s);
    }
    s.values.push([p.time, JSON.stringify(p.entry)]);
  }
  return JSON.stringify({ streams });
}

async function send(conf: LokiConf, batch: Pending[]): Promise<void> {
  const reply = await logRequest(pickEndpoint(conf) + conf.endpoint_uri, {
    method: 'POST', timeoutMs: conf.timeout, sslVerify: conf.ssl_verify, body: pushBody(batch),
    headers: { ...conf.headers, 'X-Scope-OrgID': conf.tenant_id, 'Content-Type': 'application/json' },
  });
  if (reply.status >= 300) throw new Error(`loki server returned status: ${reply.status}, body: ${reply.body}`);
}

export const lokiLogger: GatewayPlugin<LokiConf> = {
  name: 'loki-logger', version: 0.1, priority: 414,
  schema: withBatchProperties('loki logger', {
    type: 'object',
    properties: {
      endpoint_addrs: { type: 'array', minItems: 1, items: uriDef },
      endpoint_uri: { type: 'string', minLength: 1, default: '/loki/api/v1/push' },
      tenant_id: { type: 'string', default: 'fake' },
      headers: nonEmptyStrings,
      log_labels: { ...nonEmptyStrings, default: { job: 'apisix' } },
      ssl_verify: { type: 'boolean', default: false },
      timeout: { type: 'integer', minimum: 1, maximum: 60000, default: 3000, description: 'timeout in milliseconds' },
      keepalive: { type: 'boolean', default: true },
      keepalive_timeout: { type: 'integer', minimum: 1000, default: 60000, description: 'keepalive timeout in milliseconds' },
      keepalive_pool: { type: 'integer', minimum: 1, default: 5 },
      ...bodyLogProperties,
    },
    required: ['endpoint_addrs'],
  }),
  metadataSchema: loggerMetadataSchema(),
  encryptFields: ['headers'],
  checkConf: checkLogConf,
  ...bodyLogPhases<LokiConf>(),
  log(conf, ctx) {
    const entry = logEntry('loki-logger', conf, ctx);
    if (!entry) return;
    if (entry.route_id === undefined) entry.route_id = 'no-matched';
    const labels: Record<string, string> = {};
    for (const [k, v] of Object.entries(conf.log_labels)) labels[k] = resolveVar(v, ctx);
    // milliseconds, then six zeros: nanoseconds without 64-bit arithmetic, as the Lua does
    const time = `${Math.round(ctx.startTime)}000000`;
    manager.add(conf, ctx, { entry, labels, time } satisfies Pending, (batch) => send(conf, batch as Pending[]));
  },
};
