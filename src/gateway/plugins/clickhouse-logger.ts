/**
 * clickhouse-logger (apisix/plugins/clickhouse-logger.lua): each request's
 * entry is batched and POSTed to `endpoint_addr` (or one of
 * `endpoint_addrs` at random) as `INSERT INTO <logtable> FORMAT JSONEachRow`
 * and the rows, space-separated; `user`, `password` and `database` go in
 * ClickHouse's X-ClickHouse-* headers. `timeout` is in seconds; a status
 * of 400 or more fails the batch.
 */
import type { GatewayPlugin } from './registry.ts';
import { bodyLogProperties, loggerMetadataSchema, uriDef, withBatchProperties } from './batch-schema.ts';
import { BatchProcessorManager } from './batch-processor.ts';
import type { BatchConf } from './batch-processor.ts';
import { bodyLogPhases, logEntry } from './log-entry.ts';
import type { BodyLogConf } from './log-entry.ts';
import { pickEndpoint, postOrFail } from './log-http.ts';
import { serverOf } from './http-call.ts';

interface ClickHouseConf extends BatchConf, BodyLogConf {
  endpoint_addr?: string;
  endpoint_addrs?: string[];
  user: string;
  password: string;
  database: string;
  logtable: string;
  timeout: number;
  ssl_verify: boolean;
}

const manager = new BatchProcessorManager('clickhouse-logger');
const required = ['user', 'password', 'database', 'logtable'];

function send(conf: ClickHouseConf, rows: string): Promise<void> {
  const uri = pickEndpoint(conf);
  return postOrFail(uri, {
    method: 'POST', timeoutMs: conf.timeout * 1000, sslVerify: conf.ssl_verify,
    body: `INSERT INTO ${conf.logtable} FORMAT JSONEachRow ${rows}`,
    headers: {
      Host: serverOf(uri).host,
      'Content-Type': 'application/json',
      'X-ClickHouse-User': conf.user,
      'X-ClickHouse-Key': conf.password,
      'X-ClickHouse-Database': conf.database,
    },
  });
}

export const clickhouseLogger: GatewayPlugin<ClickHouseConf> = {
  name: 'clickhouse-logger', version: 0.1, priority: 398,
  schema: withBatchProperties('clickhouse-logger', {
    type: 'object',
    properties: {
      endpoint_addr: uriDef,
      endpoint_addrs: { items: uriDef, type: 'array', minItems: 1 },
      user: { type: 'string', default: '' },
      password: { type: 'string', default: '' },
      database: { type: 'string', default: '' },
      logtable: { type: 'string', default: '' },
      timeout: { type: 'integer', minimum: 1, default: 3 },
      ssl_verify: { type: 'boolean', default: true },
      ...bodyLogProperties,
    },
    oneOf: [{ required: ['endpoint_addr', ...required] }, { required: ['endpoint_addrs', ...required] }],
  }),
  metadataSchema: loggerMetadataSchema(),
  encryptFields: ['password'],
  ...bodyLogPhases<ClickHouseConf>(),
  log(conf, ctx) {
    const entry = logEntry('clickhouse-logger', conf, ctx);
    if (!entry) return;
    // one row as one object, several as objects joined by a space
    manager.add(conf, ctx, entry, (entries, size) => send(conf, size === 1 ? JSON.stringify(entries[0]) : entries.map((e) => JSON.stringify(e)).join(' ')));
  },
};
