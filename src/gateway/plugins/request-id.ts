/**
 * request-id (apisix/plugins/request-id.lua): a request without the
 * `header_name` header (X-Request-Id) gets one (by `algorithm`: a UUID v4,
 * a UUID v7, a nanoid, `range_id`'s characters, a KSUID), sent upstream and,
 * with `include_in_response`, on the answer unless the upstream gave its own.
 */
import crypto from 'node:crypto';
import type { GatewayPlugin } from './registry.ts';

interface RequestIdConf { header_name: string; include_in_response: boolean; algorithm: string; range_id?: { length?: number; char_set?: string } }

const ID = {};

// APISIX's default, its "IGK" included
const RANGE_CHARS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIGKLMNOPQRSTUVWXYZ0123456789';
const NANOID_ALPHABET = '-_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** KSUID's epoch: 2014-05-13T16:53:20Z. */
const KSUID_EPOCH = 1_400_000_000;

/** RFC 9562 version 7: 48 bits of Unix milliseconds, then random bits (version 7, variant 10). */
function uuidV7(): string {
  const b = crypto.randomBytes(16);
  b.writeUIntBE(Date.now(), 0, 6);
  b[6] = 0x70 | (b[6] & 0x0f);
  b[8] = 0x80 | (b[8] & 0x3f);
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** 21 characters of the nanoid alphabet, 6 random bits each. */
function nanoid(): string {
  return Array.from(crypto.randomBytes(21), (x) => NANOID_ALPHABET[x & 63]).join('');
}

/** A KSUID: 4 bytes of seconds since its epoch and 16 random ones, 27 base62 digits. */
function ksuid(): string {
  const b = Buffer.concat([Buffer.alloc(4), crypto.randomBytes(16)]);
  b.writeUInt32BE(Math.floor(Date.now() / 1000) - KSUID_EPOCH, 0);
  let n = BigInt(`0x${b.toString('hex')}`);
  let out = '';
  while (n > 0n) { out = BASE62[Number(n % 62n)] + out; n /= 62n; }
  return out.padStart(27, '0');
}

function newId(conf: RequestIdConf): string {
  switch (conf.algorithm) {
    case 'uuidv7': return uuidV7();
    case 'nanoid': return nanoid();
    case 'ksuid': return ksuid();
    case 'range_id': {
      const chars = conf.range_id?.char_set ?? RANGE_CHARS;
      return Array.from({ length: conf.range_id?.length ?? 16 }, () => chars[crypto.randomInt(chars.length)]).join('');
    }
    default: return crypto.randomUUID();
  }
}

export const requestId: GatewayPlugin<RequestIdConf> = {
  name: 'request-id', version: 0.1, priority: 12015,
  schema: {
    type: 'object',
    properties: {
      header_name: { type: 'string', default: 'X-Request-Id' },
      include_in_response: { type: 'boolean', default: true },
      algorithm: { type: 'string', enum: ['uuid', 'nanoid', 'range_id', 'ksuid', 'uuidv7'], default: 'uuid' },
      range_id: {
        type: 'object',
        properties: { length: { type: 'integer', minimum: 6, default: 16 }, char_set: { type: 'string', minLength: 6, default: RANGE_CHARS } },
        default: { length: 16, char_set: RANGE_CHARS },
      },
    },
  },
  rewrite(conf, ctx) {
    let id = ctx.header(conf.header_name);
    if (id === undefined || id === '') {
      id = newId(conf);
      ctx.setRequestHeader(conf.header_name, id);
    }
    ctx.state.set(ID, id);
    return undefined;
  },
  headerFilter(conf, ctx) {
    if (!conf.include_in_response) return;
    const own = ctx.responseHeader(conf.header_name);
    if (own === undefined || own === '') ctx.setResponseHeader(conf.header_name, ctx.state.get(ID) as string);
  },
};
