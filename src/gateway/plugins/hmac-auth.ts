/**
 * hmac-auth (apisix/plugins/hmac-auth.lua): `Authorization: Signature
 * keyId="...",algorithm="...",headers="...",signature="..."` names the
 * consumer whose hmac-auth `key_id` keyId is; the signature is the base64
 * HMAC, with its `secret_key`, of keyId and each listed header (`name:
 * value`, or `@request-target` as "METHOD request_uri"), each line ending
 * in "\n". The Date must be within `clock_skew`, the route's
 * `signed_headers` all signed, and with `validate_request_body` the Digest
 * header `SHA-256=base64(sha256(body))`. Every failure after the header is
 * parsed is told only "client request can't be validated", as APISIX does.
 */
import crypto from 'node:crypto';
import { ngxDecodeBase64 } from '../../core/base64.ts';
import { parseHttpTime } from '../../core/http-time.ts';
import { authConfOf, authFailed, realmSchema } from './auth-answer.ts';
import type { PluginAnswer, PluginContext } from './phase-api.ts';
import type { GatewayPlugin } from './registry.ts';

interface HmacAuthConf {
  allowed_algorithms: string[]; clock_skew: number; signed_headers: string[]; validate_request_body: boolean;
  max_req_body_size: number; hide_credentials: boolean; realm: string; anonymous_consumer?: string;
}

interface Params { keyId?: string; algorithm?: string; signature?: string; headers?: string[] }

const ALGORITHMS: Record<string, string> = { 'hmac-sha1': 'sha1', 'hmac-sha256': 'sha256', 'hmac-sha512': 'sha512' };

const VAGUE = "client request can't be validated";

/** retrieve_hmac_fields: the Authorization header's fields, or why there are none. */
function fields(ctx: PluginContext): Params | string {
  const auth = ctx.header('authorization');
  if (auth === undefined) return 'missing Authorization header';
  if (!auth.startsWith('Signature')) return "Authorization header does not start with 'Signature'";
  const p: Params = {};
  // as the Lua: the text after "Signature" and one more character, split on commas, the first key="value" of each
  for (const field of auth.slice(10).split(',')) {
    const m = /([A-Za-z0-9]+)="(.*?)"/.exec(field);
    if (!m) continue;
    if (m[1] === 'keyId' || m[1] === 'algorithm' || m[1] === 'signature') p[m[1]] = m[2];
    else if (m[1] === 'headers') p.headers = m[2].split(' ');
  }
  return p;
}

/** generate_signature: keyId, then each listed header the request has (or @request-target), a "\n" after each. */
function expected(ctx: PluginContext, secret: string, p: Params & { keyId: string; algorithm: string }): Buffer {
  const lines = [p.keyId];
  for (const h of p.headers ?? []) {
    const v = ctx.header(h);
    if (v !== undefined) lines.push(`${h}: ${v}`);
    else if (h === '@request-target') lines.push(`${ctx.method} ${ctx.variable('request_uri') || '/'}`);
  }
  return crypto.createHmac(ALGORITHMS[p.algorithm], secret).update(lines.join('\n') + '\n').digest();
}

type Outcome = { found: NonNullable<ReturnType<PluginContext['findConsumer']>> } | { message: string } | { answer: PluginAnswer };

/** validate: the consumer, or a failure (only the body read has a status of its own). */
async function check(conf: HmacAuthConf, ctx: PluginContext, p: Params): Promise<Outcome> {
  const { keyId, algorithm, signature } = p;
  if (keyId === undefined || signature === undefined || algorithm === undefined) return { message: VAGUE };
  const found = ctx.findConsumer('hmac-auth', 'key_id', keyId);
  const secret = found && authConfOf(found, 'hmac-auth')?.secret_key;
  if (!found || typeof secret !== 'string') return { message: VAGUE };
  if (!conf.allowed_algorithms.includes(algorithm) || !ALGORITHMS[algorithm]) return { message: VAGUE };
  const date = ctx.header('date');
  if (date === undefined) return { message: VAGUE };
  const time = parseHttpTime(date);
  if (time < 0 || Math.abs(Math.floor(Date.now() / 1000) - time) > conf.clock_skew) return { message: VAGUE };
  const signed = new Set(p.headers ?? []);
  if (conf.signed_headers.some((h) => !signed.has(h))) return { message: VAGUE };
  const given = ngxDecodeBase64(signature);
  const want = expected(ctx, secret, { ...p, keyId, algorithm });
  if (!given || given.length !== want.length || !crypto.timingSafeEqual(given, want)) return { message: VAGUE };
  if (conf.validate_request_body) {
    const digest = ctx.header('digest');
    if (digest === undefined) return { message: VAGUE };
    const body = await ctx.requestBody(conf.max_req_body_size);
    if (typeof body === 'number') return { answer: { status: body, engineCode: body } };
    if (!Buffer.isBuffer(body)) return { answer: { status: 413, body: { message: body.error } } };
    if (`SHA-256=${crypto.createHash('sha256').update(body).digest('base64')}` !== digest) return { message: VAGUE };
  }
  return { found };
}

export const hmacAuth: GatewayPlugin<HmacAuthConf> = {
  name: 'hmac-auth', version: 0.1, priority: 2530, type: 'auth',
  schema: {
    type: 'object',
    title: 'work with route or service object',
    properties: {
      allowed_algorithms: { type: 'array', minItems: 1, items: { type: 'string', enum: Object.keys(ALGORITHMS) }, default: Object.keys(ALGORITHMS) },
      clock_skew: { type: 'integer', default: 300, minimum: 1 },
      signed_headers: { type: 'array', default: ['date'], items: { type: 'string', minLength: 1, maxLength: 50 } },
      validate_request_body: { type: 'boolean', description: 'A boolean value telling the plugin to enable body validation', default: false },
      max_req_body_size: {
        type: 'integer', minimum: 1, default: 67108864,
        description: 'maximum request body size in bytes the plugin reads into memory to validate the digest when validate_request_body is true; larger requests are rejected with 413. Prevents unbounded memory buffering of large bodies.',
      },
      hide_credentials: { type: 'boolean', default: false },
      realm: realmSchema('hmac'),
      anonymous_consumer: { type: 'string', minLength: 1 },
    },
  },
  consumerSchema: {
    type: 'object',
    title: 'work with consumer object',
    properties: {
      key_id: { type: 'string', minLength: 1, maxLength: 256 },
      secret_key: { type: 'string', minLength: 1, maxLength: 256 },
    },
    required: ['key_id', 'secret_key'],
  },
  encryptFields: ['secret_key'],
  consumerKeyField: 'key_id',
  async rewrite(conf, ctx) {
    const challenge = `hmac realm="${conf.realm}"`;
    const p = fields(ctx);
    const r: Outcome = typeof p === 'string' ? { message: `${VAGUE}: ${p}` } : await check(conf, ctx, p);
    if ('answer' in r) return r.answer;
    if ('message' in r) {
      const refused = authFailed(ctx, challenge, r.message, conf.anonymous_consumer);
      if (refused) return refused;
    } else {
      ctx.attachConsumer(r.found.consumer, r.found.credentialId);
    }
    // the anonymous consumer's request too
    if (conf.hide_credentials) ctx.setRequestHeader('Authorization', undefined);
    return undefined;
  },
};
