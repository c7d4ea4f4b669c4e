/**
 * request-validation (apisix/plugins/request-validation.lua), in the
 * rewrite phase: the request headers (lower-cased names, a repeated one as
 * a list) are checked against `header_schema`, the body against
 * `body_schema` — decoded as a form when the Content-Type says
 * application/x-www-form-urlencoded, as JSON otherwise. A failure answers
 * `rejected_code` with `rejected_msg`, or without one the validator's (or
 * decoder's) message. A JSON body that passed goes upstream re-encoded, so
 * the upstream parses what was checked (duplicate keys, odd escapes).
 */
import { decodeJson } from '../admin/json-body.ts';
import { parseArgs } from '../../http/uri.ts';
import { schemaError, validate } from '../schema/validate.ts';
import type { Schema } from '../schema/validate.ts';
import type { PluginAnswer } from './phase-api.ts';
import type { GatewayPlugin } from './registry.ts';

interface RequestValidationConf {
  header_schema?: Schema; body_schema?: Schema; max_req_body_size: number; rejected_code: number; rejected_msg?: string;
}

/** ngx.decode_args(body, 0): a key without `=` is true, a repeated key a list of its values. */
function formTable(text: string): Record<string, unknown> {
  const { list } = parseArgs(text, 0);
  const out: Record<string, unknown> = {};
  for (let i = 0; i < list.length; i += 2) {
    const k = String(list[i]);
    const had = out[k];
    out[k] = had === undefined ? list[i + 1] : [...(Array.isArray(had) ? had : [had]), list[i + 1]];
  }
  return out;
}

/** core.json.encode of what cjson decoded: `/` escaped, numbers as %.14g, an empty array an empty object. */
function cjsonEncode(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => {
    if (typeof x === 'number' && !Number.isInteger(x)) return Number(x.toPrecision(14));
    if (Array.isArray(x) && x.length === 0) return {};
    return x;
  }).replace(/\//g, '\\/');
}

function reject(conf: RequestValidationConf, err?: string): PluginAnswer {
  const body = conf.rejected_msg ?? err;
  return body === undefined ? { status: conf.rejected_code } : { status: conf.rejected_code, body };
}

export const requestValidation: GatewayPlugin<RequestValidationConf> = {
  name: 'request-validation', version: 0.1, priority: 2800,
  schema: {
    type: 'object',
    properties: {
      header_schema: { type: 'object' },
      body_schema: { type: 'object' },
      max_req_body_size: {
        type: 'integer', minimum: 1, default: 67108864,
        description: 'maximum request body size in bytes buffered into memory; larger request bodies are rejected',
      },
      rejected_code: { type: 'integer', minimum: 200, maximum: 599, default: 400 },
      rejected_msg: { type: 'string', minLength: 1, maxLength: 256 },
    },
    anyOf: [{ required: ['header_schema'] }, { required: ['body_schema'] }],
  },
  checkConf(conf) {
    for (const s of [conf.body_schema, conf.header_schema]) {
      const err = s ? schemaError(s) : undefined;
      if (err) return err;
    }
    return undefined;
  },
  async rewrite(conf, ctx) {
    const headers = ctx.requestHeaders();
    if (conf.header_schema) {
      const err = validate(conf.header_schema, headers);
      if (err) return reject(conf, err);
    }
    if (!conf.body_schema) return undefined;
    const body = await ctx.requestBody(conf.max_req_body_size);
    // too big, unreadable or empty: core.request.get_body gives no body, and only rejected_msg is said
    if (typeof body === 'number' || !Buffer.isBuffer(body) || body.length === 0) return reject(conf);
    const type = headers['content-type'];
    // two Content-Types: the upstream may read the body otherwise than it was checked
    if (Array.isArray(type)) return reject(conf);
    const form = type !== undefined && type.toLowerCase().startsWith('application/x-www-form-urlencoded');
    let value: unknown;
    if (form) value = formTable(body.toString('latin1'));
    else {
      const got = decodeJson(body.toString('utf8'));
      if ('error' in got) return reject(conf, got.error);
      value = got.value;
    }
    const err = validate(conf.body_schema, value);
    if (err) return reject(conf, err);
    if (!form) ctx.setRequestBody(Buffer.from(cjsonEncode(value)));
    return undefined;
  },
};
