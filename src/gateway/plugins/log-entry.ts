/**
 * The log entry of APISIX's logger plugins (apisix/utils/log-util.lua):
 * get_full_log's request / response / upstream / latencies object, or the
 * `log_format` of the conf or the plugin metadata (`$var` values, nested
 * objects) as get_custom_format_log builds it, `log_format_extra` added to
 * the full entry; the request body read in the access phase and the
 * response body held by the body filter when the conf asks for them.
 */
import os from 'node:os';
import zlib from 'node:zlib';
import { GATEHOUSE_VERSION } from '../../core/version.ts';
import { compileVars } from '../router/expr.ts';
import type { Expr } from '../router/expr.ts';
import { exprError } from '../admin/vars-check.ts';
import type { BodyChunk, PhaseFunctions, PluginContext } from './phase-api.ts';
import { lastSeconds } from './prometheus.ts';

/** The properties every logger's conf has (batch-schema.ts bodyLogProperties), `match` for file-logger. */
export interface BodyLogConf {
  log_format?: Record<string, unknown>;
  log_format_extra?: Record<string, unknown>;
  include_req_body: boolean;
  include_req_body_expr?: unknown[];
  include_resp_body: boolean;
  include_resp_body_expr?: unknown[];
  max_req_body_bytes: number;
  max_resp_body_bytes: number;
  match?: unknown[];
}

export type LogEntry = Record<string, unknown>;

const MAX_LOG_FORMAT_DEPTH = 5;
const REQUEST_BODY = {};
const hostname = os.hostname();

/** Compiled expressions, once per conf object and field (APISIX keeps them on the conf). */
const compiled = new WeakMap<object, Map<string, Expr | undefined>>();
function exprOf(conf: object, field: string, rules: unknown[] | undefined): Expr | undefined {
  let byField = compiled.get(conf);
  if (!byField) compiled.set(conf, (byField = new Map()));
  if (!byField.has(field)) {
    let e: Expr | undefined;
    try {
      e = compileVars(rules);
    } catch {
      // as log-util when expr.new fails: the body is not logged, the entry not matched
      e = () => false;
    }
    byField.set(field, e);
  }
  return byField.get(field);
}

/** include_req_body, and its expression when there is one, hold for this request. */
function logsRequestBody(conf: BodyLogConf, ctx: PluginContext): boolean {
  if (!conf.include_req_body) return false;
  const e = exprOf(conf, 'req', conf.include_req_body_expr);
  return !e || e(ctx.variable);
}

/** APISIX's variables beyond nginx's that a log_format may name (ctx.var). */
function variableOf(ctx: PluginContext, name: string): unknown {
  switch (name) {
    case 'route_id': return ctx.route?.id;
    case 'route_name': return (ctx.route?.conf as { name?: string } | undefined)?.name;
    case 'service_id': return ctx.route?.conf.service_id;
    case 'consumer_name': return ctx.consumer?.username;
    default: return ctx.variable(name);
  }
}

/** The request body as log-util's get_request_body gives it: at most `max` bytes, as text. */
function requestBodyText(ctx: PluginContext, max: number): string | undefined {
  const body = ctx.state.get(REQUEST_BODY) as Buffer | undefined;
  if (!body || body.length === 0) return undefined;
  return body.subarray(0, max).toString('latin1');
}

/** A log_format's values: `$name` a variable, a nested object its own entry (five levels at most), anything else as it is. */
function formatted(ctx: PluginContext, format: Record<string, unknown>, maxReqBody: number, depth: number): LogEntry {
  const entry: LogEntry = {};
  for (const [k, v] of Object.entries(format)) {
    if (typeof v === 'string' && v.startsWith('$')) {
      const name = v.slice(1);
      entry[k] = name === 'request_body' ? requestBodyText(ctx, maxReqBody) : variableOf(ctx, name);
    } else if (v && typeof v === 'object') {
      // as log-util: too deep a nesting is logged as an empty object
      entry[k] = depth >= MAX_LOG_FORMAT_DEPTH || Array.isArray(v) ? {} : formatted(ctx, v as Record<string, unknown>, maxReqBody, depth + 1);
    } else {
      entry[k] = v;
    }
  }
  return entry;
}

/** get_custom_format_log: the format's entry with the matched route's route_id and service_id. */
function customEntry(ctx: PluginContext, format: Record<string, unknown>, maxReqBody: number): LogEntry {
  const entry = formatted(ctx, format, maxReqBody, 1);
  if (ctx.route) {
    entry.service_id = ctx.route.conf.service_id;
    entry.route_id = ctx.route.id;
  }
  return entry;
}

/** ngx.req.get_uri_args: decoded, an argument without `=` as true, a repeated one as a list. */
function queryTable(args: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (args === '') return out;
  for (const pair of args.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const k = decode(eq < 0 ? pair : pair.slice(0, eq));
    if (k === '') continue;
    const v: unknown = eq < 0 ? true : decode(pair.slice(eq + 1));
    const had = out[k];
    out[k] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v];
  }
  return out;
}

function decode(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return s;
  }
}

function numberOr(v: string | undefined): number | string | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  return v !== '' && Number.isFinite(n) ? n : v;
}

/** latency_details_in_ms: the whole request, the upstream's part (its last try), and the rest (never below 0). */
function latencies(ctx: PluginContext): { latency: number; upstream: number | undefined; apisix: number } {
  const latency = Date.now() - ctx.startTime;
  const up = lastSeconds(ctx.variable('upstream_response_time'));
  const upstream = up === undefined ? undefined : up * 1000;
  return { latency, upstream, apisix: upstream === undefined ? latency : Math.max(0, latency - upstream) };
}

/** get_full_log. */
function fullEntry(conf: BodyLogConf, ctx: PluginContext): LogEntry {
  const v = (name: string) => ctx.variable(name);
  const route = ctx.route;
  const requestUri = v('request_uri') ?? '';
  const times = latencies(ctx);
  const entry: LogEntry = {
    request: {
      url: `${v('scheme')}://${v('host')}:${v('server_port')}${requestUri}`,
      uri: requestUri,
      method: ctx.method,
      headers: ctx.requestHeaders(),
      querystring: queryTable(v('args') ?? ''),
      size: numberOr(v('request_length')),
    },
    response: { status: ctx.status || Number(v('status')), headers: ctx.responseHeaders(), size: numberOr(v('bytes_sent')) },
    server: { hostname, version: GATEHOUSE_VERSION },
    upstream: v('upstream_addr'),
    service_id: route ? (route.conf.service_id ?? '') : v('host'),
    route_id: route?.id,
    consumer: ctx.consumer ? { username: ctx.consumer.username } : undefined,
    client_ip: v('remote_addr'),
    start_time: ctx.startTime,
    latency: times.latency,
    upstream_latency: times.upstream,
    apisix_latency: times.apisix,
  };
  if (conf.include_resp_body) (entry.response as LogEntry).body = responseBodyText(conf, ctx);
  if (logsRequestBody(conf, ctx)) (entry.request as LogEntry).body = requestBodyText(ctx, conf.max_req_body_bytes);
  return entry;
}

/**
 * get_log_entry: undefined when `match` does not hold; the conf's
 * log_format, else the metadata's, else the full entry with
 * log_format_extra's keys added (never over a field it has).
 */
export function logEntry(pluginName: string, conf: BodyLogConf, ctx: PluginContext): LogEntry | undefined {
  return logEntryParts(pluginName, conf, ctx)?.entry;
}

/** get_log_entry's three results: the entry, whether a log_format made it, and log_format_extra's resolved keys. */
export function logEntryParts(pluginName: string, conf: BodyLogConf, ctx: PluginContext): { entry: LogEntry; customized: boolean; extra?: LogEntry } | undefined {
  if (conf.match && conf.match.length > 0) {
    // any one of the expressions holding is a match (log-util's is_match)
    const holds = conf.match.some((m, i) => exprOf(conf, `match${i}`, m as unknown[])?.(ctx.variable) ?? true);
    if (!holds) return undefined;
  }
  const metadata = ctx.pluginMetadata(pluginName);
  const metaFormat = metadata?.log_format as Record<string, unknown> | undefined;
  const format = conf.log_format ?? (metaFormat && Object.keys(metaFormat).length > 0 ? metaFormat : undefined);
  if (format) return { entry: customEntry(ctx, format, conf.max_req_body_bytes), customized: true };
  const entry = fullEntry(conf, ctx);
  const extraFormat = conf.log_format_extra ?? (metadata?.log_format_extra as Record<string, unknown> | undefined);
  if (!extraFormat || Object.keys(extraFormat).length === 0) return { entry, customized: false };
  const more = formatted(ctx, extraFormat, conf.max_req_body_bytes, 1);
  const extra: LogEntry = {};
  for (const k of Object.keys(extraFormat)) {
    extra[k] = more[k];
    if (entry[k] === undefined) entry[k] = more[k];
  }
  return { entry, customized: false, extra };
}

/** check_log_schema: the body expressions must compile. */
export function checkLogConf(conf: BodyLogConf): string | undefined {
  for (const field of ['include_req_body_expr', 'include_resp_body_expr'] as const) {
    const rules = conf[field];
    const err = rules && exprError(rules);
    if (err) return `failed to validate the '${field}' expression: ${err}`;
  }
  return undefined;
}

interface HeldBody { parts: Buffer[]; size: number }

/** The held response body (collect_body), decoded when the upstream's Content-Encoding is gzip or br. */
function responseBodyText(conf: BodyLogConf, ctx: PluginContext): string | undefined {
  const held = ctx.state.get(conf) as HeldBody | undefined;
  if (!held) return undefined;
  let body = Buffer.concat(held.parts);
  const encoding = ctx.responseHeader('content-encoding');
  // the gzip and brotli plugins compress after the body filters: what they saw is plain
  if (encoding && ctx.gzipLevel === undefined && ctx.brotli === undefined) {
    try {
      if (encoding === 'gzip') body = zlib.gunzipSync(body);
      else if (encoding === 'br') body = zlib.brotliDecompressSync(body);
    } catch { /* as APISIX: the body as it came */ }
  }
  return body.toString('latin1');
}

/**
 * The phases every logger shares: the request body read in the access phase
 * when it will be logged (check_and_read_req_body), the response body held
 * in the body filter up to max_resp_body_bytes (collect_body).
 */
export function bodyLogPhases<C extends BodyLogConf>(): PhaseFunctions<C> {
  return {
    access(conf, ctx) {
      if (!logsRequestBody(conf, ctx) || ctx.state.has(REQUEST_BODY)) return undefined;
      return ctx.requestBody().then((body) => {
        if (Buffer.isBuffer(body)) ctx.state.set(REQUEST_BODY, body);
        return undefined;
      });
    },
    filtersBody(conf, ctx) {
      if (!conf.include_resp_body) return false;
      const e = exprOf(conf, 'resp', conf.include_resp_body_expr);
      return !e || e(ctx.variable);
    },
    bodyFilter(conf, ctx, piece: BodyChunk) {
      let held = ctx.state.get(conf) as HeldBody | undefined;
      if (!held) ctx.state.set(conf, (held = { parts: [], size: 0 }));
      const room = conf.max_resp_body_bytes - held.size;
      if (room > 0 && piece.chunk.length > 0) {
        const part = piece.chunk.length > room ? piece.chunk.subarray(0, room) : piece.chunk;
        // a copy: the piece's buffer may be reused once it is written
        held.parts.push(Buffer.from(part));
        held.size += part.length;
      }
      return undefined;
    },
  };
}
