/**
 * jwt-auth (apisix/plugins/jwt-auth.lua, its parser.lua): a JWT from the
 * `header` (an optional `Bearer ` prefix), else the `query` argument, else
 * the `cookie` names by its `key_claim_name` claim the consumer whose
 * jwt-auth `key` that is; the token's `alg` must be the consumer's
 * `algorithm`, its signature verify with the consumer's secret (HS*) or
 * public key, and `exp`/`nbf` hold within `lifetime_grace_period`.
 * APISIX 3.x has no signing API (`/apisix/plugin/jwt/sign`) any more.
 */
import crypto from 'node:crypto';
import { ngxDecodeBase64 } from '../../core/base64.ts';
import { fetchRef, isSecretRef } from '../dataplane/secret-refs.ts';
import { authConfOf, authFailed, realmSchema } from './auth-answer.ts';
import type { PluginContext } from './phase-api.ts';
import type { GatewayPlugin } from './registry.ts';

interface JwtAuthConf {
  header: string; query: string; cookie: string; hide_credentials: boolean; key_claim_name: string;
  store_in_ctx: boolean; realm: string; anonymous_consumer?: string; claims_to_verify?: Array<'exp' | 'nbf'>;
}

const HS = ['HS256', 'HS384', 'HS512'];
const ASYMMETRIC = ['RS256', 'RS384', 'RS512', 'ES256', 'ES384', 'ES512', 'PS256', 'PS384', 'PS512', 'EdDSA'];

/** Per algorithm: the digest, and for ES and PS the signature length APISIX's verifier asserts. */
const VERIFY: Record<string, { hash: string | null; pss?: true; ecdsa?: true; length?: number }> = {
  RS256: { hash: 'sha256' }, RS384: { hash: 'sha384' }, RS512: { hash: 'sha512' },
  ES256: { hash: 'sha256', ecdsa: true, length: 64 }, ES384: { hash: 'sha384', ecdsa: true, length: 96 }, ES512: { hash: 'sha512', ecdsa: true, length: 132 },
  PS256: { hash: 'sha256', pss: true, length: 256 }, PS384: { hash: 'sha384', pss: true, length: 256 }, PS512: { hash: 'sha512', pss: true, length: 256 },
  EdDSA: { hash: null },
};

interface Jwt { header: Record<string, unknown>; payload: Record<string, unknown>; signed: string; signature: string }

const MISSING = 'Missing JWT token in request';
const FAILED = 'failed to verify jwt';

/** lua-resty-jwt's load_jwt for a JWS: three base64url parts, the first two JSON objects. */
function parse(token: string): Jwt | undefined {
  const parts = token.split('.');
  if (parts.length !== 3) return undefined;
  const json = (s: string): Record<string, unknown> | undefined => {
    // lua-resty-jwt maps - and _ to + and / and decodes as plain base64: both alphabets pass
    const raw = ngxDecodeBase64(s.replace(/-/g, '+').replace(/_/g, '/'));
    if (!raw) return undefined;
    try {
      const v: unknown = JSON.parse(raw.toString('utf8'));
      return v && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : undefined;
    } catch { return undefined; }
  };
  const header = json(parts[0]);
  const payload = json(parts[1]);
  if (!header || !payload) return undefined;
  return { header, payload, signed: `${parts[0]}.${parts[1]}`, signature: parts[2] };
}

/** Public keys by their PEM text (a consumer's key is used on every request); emptied when full. */
const keys = new Map<string, crypto.KeyObject | null>();

function publicKey(pem: string): crypto.KeyObject | null {
  let k = keys.get(pem);
  if (k !== undefined) return k;
  // a private key's PEM serves too, as openssl's pkey.new takes it
  try { k = crypto.createPublicKey(pem); } catch { k = null; }
  if (keys.size >= 256) keys.clear();
  keys.set(pem, k);
  return k;
}

function verifySignature(jwt: Jwt, alg: string, secret: Buffer | string): boolean {
  const sig = ngxDecodeBase64(jwt.signature, true);
  if (!sig) return false;
  const data = Buffer.from(jwt.signed, 'latin1');
  if (HS.includes(alg)) {
    const mac = crypto.createHmac(`sha${alg.slice(2)}`, secret).update(data).digest();
    return mac.length === sig.length && crypto.timingSafeEqual(mac, sig);
  }
  const v = VERIFY[alg];
  const key = publicKey(secret.toString());
  if (!v || !key || (v.length !== undefined && sig.length !== v.length)) return false;
  try {
    if (v.pss) return crypto.verify(v.hash, data, { key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: crypto.constants.RSA_PSS_SALTLEN_AUTO }, sig);
    if (v.ecdsa) return crypto.verify(v.hash, data, { key, dsaEncoding: 'ieee-p1363' }, sig);
    return crypto.verify(v.hash, data, key, sig);
  } catch { return false; }
}

/** parser.lua verify_claims: listed claims must be there; without a list, exp and nbf are checked when present. */
function claimsHold(payload: Record<string, unknown>, listed: string[] | undefined, leeway: number): boolean {
  const now = Math.floor(Date.now() / 1000);
  const required = listed !== undefined && listed.length > 0;
  for (const name of required ? listed : ['nbf', 'exp']) {
    const v = payload[name];
    if (v === undefined || v === null) {
      if (required) return false;
      continue;
    }
    if (typeof v !== 'number') return false;
    if (name === 'nbf' ? !(v < now + leeway) : !(v > now - leeway)) return false;
  }
  return true;
}

/** remove_specified_cookie: the `name=value` pairs of the header but `key`'s, joined by "; ". */
function withoutCookie(header: string, key: string): string {
  const kept: string[] = [];
  for (const m of header.matchAll(/([a-zA-Z0-9_-]*)=([a-zA-Z0-9._-]*)/g)) if (m[1] !== key) kept.push(m[0]);
  return kept.join('; ');
}

/** fetch_jwt_token: header, query, cookie in turn; hide_credentials hides the one found. */
function fetchToken(conf: JwtAuthConf, ctx: PluginContext): string | undefined {
  const h = ctx.header(conf.header);
  if (h !== undefined) {
    if (conf.hide_credentials) ctx.setRequestHeader(conf.header, undefined);
    return h.startsWith('Bearer ') || h.startsWith('bearer ') ? h.slice(7) : h;
  }
  const q = ctx.arg(conf.query);
  if (q !== undefined) {
    if (conf.hide_credentials) ctx.removeArg(conf.query);
    return q;
  }
  const c = ctx.variable(`cookie_${conf.cookie}`);
  if (c === undefined) return undefined;
  if (conf.hide_credentials) {
    const rest = withoutCookie(ctx.header('cookie') ?? '', conf.cookie);
    ctx.setRequestHeader('Cookie', rest === '' ? undefined : rest);
  }
  return c;
}

/** The HMAC secret or the public key of a consumer's conf ($env:// references resolved), or undefined. */
function authSecret(auth: Record<string, unknown>): Buffer | string | undefined {
  const hs = HS.includes(String(auth.algorithm ?? 'HS256'));
  const field = hs ? auth.secret : auth.public_key;
  if (typeof field !== 'string') return undefined;
  let v = field;
  if (isSecretRef(v)) {
    const r = fetchRef(v);
    if ('error' in r) return undefined;
    v = r.value;
  }
  if (hs && auth.base64_secret === true) return ngxDecodeBase64(v);
  return v;
}

/** find_consumer: the consumer and credential, or the message of the 401. */
function authenticate(conf: JwtAuthConf, ctx: PluginContext): { found: NonNullable<ReturnType<PluginContext['findConsumer']>> } | { message: string } {
  const token = fetchToken(conf, ctx);
  if (token === undefined) return { message: MISSING };
  const jwt = parse(token);
  if (!jwt) return { message: 'JWT token invalid' };
  const user = jwt.payload[conf.key_claim_name];
  if (user === undefined || user === null || user === false) return { message: 'missing user key in JWT token' };
  const found = typeof user === 'string' ? ctx.findConsumer('jwt-auth', 'key', user) : undefined;
  const auth = found && authConfOf(found, 'jwt-auth');
  if (!found || !auth) return { message: 'Invalid user key in JWT token' };
  const secret = authSecret(auth);
  const alg = String(auth.algorithm ?? 'HS256');
  if (secret === undefined || jwt.header.alg !== alg || !verifySignature(jwt, alg, secret)) return { message: FAILED };
  const leeway = typeof auth.lifetime_grace_period === 'number' ? auth.lifetime_grace_period : 0;
  if (!claimsHold(jwt.payload, conf.claims_to_verify, leeway)) return { message: FAILED };
  return { found };
}

export const jwtAuth: GatewayPlugin<JwtAuthConf> = {
  name: 'jwt-auth', version: 0.1, priority: 2510, type: 'auth',
  schema: {
    type: 'object',
    properties: {
      header: { type: 'string', default: 'authorization' },
      query: { type: 'string', default: 'jwt' },
      cookie: { type: 'string', default: 'jwt' },
      hide_credentials: { type: 'boolean', default: false },
      key_claim_name: { type: 'string', default: 'key', minLength: 1 },
      store_in_ctx: { type: 'boolean', default: false },
      realm: realmSchema('jwt'),
      anonymous_consumer: { type: 'string', minLength: 1 },
      claims_to_verify: { type: 'array', items: { type: 'string', enum: ['exp', 'nbf'] }, uniqueItems: true },
    },
  },
  consumerSchema: {
    type: 'object',
    properties: {
      key: { type: 'string', minLength: 1 },
      secret: { type: 'string', minLength: 1 },
      algorithm: { type: 'string', enum: [...HS, ...ASYMMETRIC], default: 'HS256' },
      exp: { type: 'integer', minimum: 1, default: 86400 },
      base64_secret: { type: 'boolean', default: false },
      lifetime_grace_period: { type: 'integer', minimum: 0, default: 0 },
    },
    dependencies: {
      algorithm: {
        oneOf: [
          { properties: { algorithm: { enum: HS, default: 'HS256' } } },
          { properties: { public_key: { type: 'string', minLength: 1 }, algorithm: { enum: ASYMMETRIC } }, required: ['public_key'] },
        ],
      },
    },
    required: ['key'],
  },
  encryptFields: ['secret'],
  consumerKeyField: 'key',
  checkConsumerConf(conf) {
    const hs = String(conf.algorithm).startsWith('HS');
    if (hs && conf.secret === undefined) return 'property "secret" is required when using HS based algorithms';
    if (conf.base64_secret === true && typeof conf.secret === 'string' && !isSecretRef(conf.secret) && !ngxDecodeBase64(conf.secret)) {
      return 'base64_secret required but the secret is not in base64 format';
    }
    if (!hs && conf.public_key === undefined) return 'missing valid public key';
    return undefined;
  },
  rewrite(conf, ctx) {
    const r = authenticate(conf, ctx);
    if ('message' in r) return authFailed(ctx, `Bearer realm="${conf.realm}"`, r.message, conf.anonymous_consumer);
    ctx.attachConsumer(r.found.consumer, r.found.credentialId);
    return undefined;
  },
};
