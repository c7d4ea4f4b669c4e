/**
 * elasticsearch-logger (apisix/plugins/elasticsearch-logger.lua): each
 * request's entry becomes a _bulk pair, an `index` action line (`_index`
 * from `field.index`, where `{fmt}` is the date as os.date formats it and
 * `$vars` are resolved; `_type: _doc` for an ES 5 or 6) and the entry, and
 * a batch's pairs are POSTed as one NDJSON body to `<endpoint>/_bulk`.
 * The server's major version is asked for (GET the endpoint) in the access
 * phase until it is known, as the Lua does; `auth` is Basic; `timeout` is
 * in seconds. Any status but 200 fails the batch.
 */
import type { GatewayPlugin } from './registry.ts';
import { bodyLogProperties, loggerMetadataSchema, withBatchProperties } from './batch-schema.ts';
import { BatchProcessorManager, pluginLog } from './batch-processor.ts';
import type { BatchConf } from './batch-processor.ts';
import { bodyLogPhases, logEntry } from './log-entry.ts';
import type { BodyLogConf } from './log-entry.ts';
import { logRequest, pickEndpoint } from './log-http.ts';
import { resolveVar } from './resolve-var.ts';

interface EsConf extends BatchConf, BodyLogConf {
  endpoint_addr?: string;
  endpoint_addrs?: string[];
  field: { index: string };
  auth?: { username: string; password: string };
  headers?: Record<string, string>;
  timeout: number;
  ssl_verify: boolean;
}

const manager = new BatchProcessorManager('elasticsearch-logger');
/** The major version per conf (APISIX's conf._version): asked once it is known. */
const versions = new WeakMap<object, string>();
const endpoint = { type: 'string', pattern: '[^/]$' };

function baseHeaders(conf: EsConf): Record<string, string> {
  return {
    ...(conf.auth ? { Authorization: `Basic ${Buffer.from(`${conf.auth.username}:${conf.auth.password}`).toString('base64')}` } : {}),
    ...conf.headers,
  };
}

/** get_es_major_version: GET the endpoint, the digits before the first dot of version.number. */
async function majorVersion(conf: EsConf): Promise<string> {
  const reply = await logRequest(pickEndpoint(conf), { method: 'GET', headers: baseHeaders(conf), timeoutMs: conf.timeout * 1000, sslVerify: conf.ssl_verify });
  if (reply.status !== 200) throw new Error(`server returned status: ${reply.status}, body: ${reply.body}`);
  let body: { version?: { number?: unknown } };
  try {
    body = JSON.parse(reply.body) as typeof body;
  } catch (e) {
    throw new Error(`failed to decode response body: ${(e as Error).message}`);
  }
  const number = body?.version?.number;
  if (typeof number !== 'string') throw new Error('failed to get version from response body');
  const m = /^(\d+)\./.exec(number);
  if (!m) throw new Error(`invalid version format: ${number}`);
  return m[1];
}

/** fetch_and_update_es_version: a failure is logged and asked again next time. */
async function ensureVersion(conf: EsConf): Promise<void> {
  if (versions.has(conf)) return;
  try {
    versions.set(conf, await majorVersion(conf));
  } catch (e) {
    pluginLog().error(`failed to get Elasticsearch version: ${(e as Error).message}`);
  }
}

const pad = (n: number, w = 2) => String(n).padStart(w, '0');
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** os.date's common strftime conversions, in local time; others are kept as written. */
function osDate(format: string, d = new Date()): string {
  return format.replace(/%([YmdHMSyjbe%])/g, (_m, c: string) => {
    switch (c) {
      case 'Y': return String(d.getFullYear());
      case 'y': return pad(d.getFullYear() % 100);
      case 'm': return pad(d.getMonth() + 1);
      case 'd': return pad(d.getDate());
      case 'e': return String(d.getDate()).padStart(2, ' ');
      case 'H': return pad(d.getHours());
      case 'M': return pad(d.getMinutes());
      case 'S': return pad(d.getSeconds());
      case 'b': return MONTHS[d.getMonth()];
      case 'j': return pad(Math.floor((d.getTime() - new Date(d.getFullYear(), 0, 1).getTime()) / 86_400_000) + 1, 3);
      default: return '%';
    }
  });
}

export const elasticsearchLogger: GatewayPlugin<EsConf> = {
  name: 'elasticsearch-logger', version: 0.1, priority: 413,
  schema: withBatchProperties('elasticsearch-logger', {
    type: 'object',
    properties: {
      endpoint_addr: endpoint,
      endpoint_addrs: { type: 'array', minItems: 1, items: endpoint },
      field: { type: 'object', properties: { index: { type: 'string' } }, required: ['index'] },
      log_format: { type: 'object' },
      log_format_extra: { type: 'object' },
      auth: {
        type: 'object',
        properties: { username: { type: 'string', minLength: 1 }, password: { type: 'string', minLength: 1 } },
        oneOf: [{ required: ['username', 'password'] }],
      },
      headers: { type: 'object', minProperties: 1, patternProperties: { '^[^:]+$': { type: 'string', minLength: 1 } }, additionalProperties: false },
      timeout: { type: 'integer', minimum: 1, default: 10 },
      ssl_verify: { type: 'boolean', default: true },
      ...bodyLogProperties,
    },
    oneOf: [{ required: ['endpoint_addr', 'field'] }, { required: ['endpoint_addrs', 'field'] }],
  }),
  metadataSchema: loggerMetadataSchema(),
  encryptFields: ['auth.password', 'headers'],
  ...bodyLogPhases<EsConf>(),
  access(conf, ctx) {
    const bodies = bodyLogPhases<EsConf>().access!;
    return ensureVersion(conf).then(() => bodies(conf, ctx));
  },
  log(conf, ctx) {
    // a `{...}` not after a `$` is a date format; then the variables
    const index = resolveVar(conf.field.index.replace(/(?<!\$)\{([^}]*)\}/g, (_m, f: string) => osDate(f)), ctx);
    const entry = logEntry('elasticsearch-logger', conf, ctx);
    if (!entry) return;
    const v = versions.get(conf);
    const action = { index: { _index: index, ...(v === '5' || v === '6' ? { _type: '_doc' } : {}) } };
    manager.add(conf, ctx, `${JSON.stringify(action)}\n${JSON.stringify(entry)}\n`, async (pairs) => {
      await ensureVersion(conf);
      const reply = await logRequest(`${pickEndpoint(conf)}/_bulk`, {
        method: 'POST', timeoutMs: conf.timeout * 1000, sslVerify: conf.ssl_verify, body: (pairs as string[]).join(''),
        headers: { 'Content-Type': 'application/x-ndjson', Accept: 'application/vnd.elasticsearch+json', ...baseHeaders(conf) },
      });
      if (reply.status !== 200) throw new Error(`elasticsearch server returned status: ${reply.status}, body: ${reply.body}`);
    });
  },
};
