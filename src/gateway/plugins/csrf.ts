/**
 * csrf (apisix/plugins/csrf.lua): every response sets a signed token in
 * the cookie `name`; a request with an unsafe method (not GET, HEAD or
 * OPTIONS) must carry the same token in the header `name`, unexpired and
 * signed with `key`. The token is base64 of
 * `{"random":R,"expires":T,"sign":S}` with S the hex SHA-256 of
 * `{expires:T,random:R,key:KEY}`, numbers written as Lua writes them.
 */
import crypto from 'node:crypto';
import { ngxDecodeBase64 } from '../../core/base64.ts';
import { cookieTime } from '../../core/http-time.ts';
import { formatLuaNumber } from '../../lua/number-format.ts';
import { pluginLog } from './batch-processor.ts';
import type { GatewayPlugin } from './registry.ts';

interface CsrfConf { key: string; expires: number; name: string }

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** A value as Lua's `..` writes it into the signed text (a number by %.14g). */
function luaText(v: unknown): string | undefined {
  if (typeof v === 'number') return formatLuaNumber(v);
  if (typeof v === 'string') return v;
  return undefined;
}

function sign(random: string, expires: string, key: string): string {
  return crypto.createHash('sha256').update(`{expires:${expires},random:${random},key:${key}}`, 'latin1').digest('hex');
}

function newToken(conf: CsrfConf, now: number): string {
  const random = formatLuaNumber(Number(Math.random().toPrecision(14)));
  const token = `{"random":${random},"expires":${now},"sign":"${sign(random, String(now), conf.key)}"}`;
  return Buffer.from(token, 'latin1').toString('base64');
}

/** Why `token` is not a valid one (logged as APISIX logs it), or undefined when it is. */
function tokenError(conf: CsrfConf, token: string, now: number): string | undefined {
  const text = ngxDecodeBase64(token);
  if (!text) return 'csrf token base64 decode error';
  let t: unknown;
  try {
    t = JSON.parse(text.toString('utf8'));
  } catch (e) {
    return `decode token error: ${(e as Error).message}`;
  }
  if (!t || typeof t !== 'object') return 'decode token error: not an object';
  const { random, expires, sign: given } = t as Record<string, unknown>;
  const r = luaText(random);
  if (random === undefined || random === null || random === false || r === undefined) return 'no random in token';
  const e = luaText(expires);
  if (expires === undefined || expires === null || e === undefined) return 'no expires in token';
  if (conf.expires > 0 && now - Number(expires) > conf.expires) return 'token has expired';
  if (given !== sign(r, e, conf.key)) return 'Invalid signatures';
  return undefined;
}

export const csrf: GatewayPlugin<CsrfConf> = {
  name: 'csrf', version: 0.1, priority: 2980,
  schema: {
    type: 'object',
    properties: {
      key: { description: 'use to generate csrf token', type: 'string' },
      expires: { description: 'expires time(s) for csrf token', type: 'integer', default: 7200 },
      name: { description: 'the csrf token name', type: 'string', default: 'apisix-csrf-token' },
    },
    required: ['key'],
  },
  encryptFields: ['key'],
  access(conf, ctx) {
    if (SAFE_METHODS.has(ctx.method)) return undefined;
    const header = ctx.header(conf.name);
    if (!header) return { status: 401, body: { error_msg: 'no csrf token in headers' } };
    const cookie = ctx.variable(`cookie_${conf.name}`);
    if (cookie === undefined) return { status: 401, body: { error_msg: 'no csrf cookie' } };
    if (header !== cookie) return { status: 401, body: { error_msg: 'csrf token mismatch' } };
    const err = tokenError(conf, cookie, Math.floor(Date.now() / 1000));
    if (err) {
      pluginLog().error(err);
      return { status: 401, body: { error_msg: 'Failed to verify the csrf token signature' } };
    }
    return undefined;
  },
  headerFilter(conf, ctx) {
    const now = Math.floor(Date.now() / 1000);
    ctx.addResponseHeader('Set-Cookie', `${conf.name}=${newToken(conf, now)};path=/;SameSite=Lax;Expires=${cookieTime(now + conf.expires)}`);
  },
};
