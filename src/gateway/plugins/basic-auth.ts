/**
 * basic-auth (apisix/plugins/basic-auth.lua): `Authorization: Basic
 * base64(user:pass)` names the consumer whose basic-auth `username` is
 * user, if its `password` is pass. As APISIX: the decoded text is split on
 * `:` and only the first two fields count, whitespace is removed from
 * both, every 401 says the realm.
 */
import { authConfOf, authFailed, realmSchema } from './auth-answer.ts';
import type { GatewayPlugin } from './registry.ts';

interface BasicAuthConf { hide_credentials: boolean; realm: string; anonymous_consumer?: string }

/** Headers read lately → their credentials (a client sends the same header on every request); emptied when full. */
const seen = new Map<string, [string, string] | undefined>();
const SEEN_MAX = 1024;

/** user and password, or undefined for a header APISIX calls invalid. */
function credentials(header: string): [string, string] | undefined {
  if (seen.has(header)) return seen.get(header);
  const cred = parse(header);
  if (seen.size >= SEEN_MAX) seen.clear();
  seen.set(header, cred);
  return cred;
}

function parse(header: string): [string, string] | undefined {
  const m = /basic\s(.+)/i.exec(header);
  if (!m) return undefined;
  const b64 = m[1];
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64)) return undefined;
  const fields = Buffer.from(b64, 'base64').toString('latin1').split(':');
  if (fields.length < 2) return undefined;
  return [fields[0].replace(/\s+/g, ''), fields[1].replace(/\s+/g, '')];
}

export const basicAuth: GatewayPlugin<BasicAuthConf> = {
  name: 'basic-auth', version: 0.1, priority: 2520, type: 'auth',
  schema: {
    type: 'object',
    title: 'work with route or service object',
    properties: {
      hide_credentials: { type: 'boolean', default: false },
      realm: realmSchema('basic'),
      anonymous_consumer: { type: 'string', minLength: 1 },
    },
  },
  consumerSchema: {
    type: 'object',
    title: 'work with consumer object',
    properties: { username: { type: 'string' }, password: { type: 'string' } },
    required: ['username', 'password'],
  },
  encryptFields: ['password'],
  consumerKeyField: 'username',
  rewrite(conf, ctx) {
    const challenge = `Basic realm="${conf.realm}"`;
    const header = ctx.header('authorization');
    if (header === undefined) return authFailed(ctx, challenge, 'Missing authorization in request', conf.anonymous_consumer);
    const cred = credentials(header);
    if (!cred) return authFailed(ctx, challenge, 'Invalid authorization in request', conf.anonymous_consumer);
    const found = ctx.findConsumer('basic-auth', 'username', cred[0]);
    if (!found || authConfOf(found, 'basic-auth')?.password !== cred[1]) {
      return authFailed(ctx, challenge, 'Invalid user authorization', conf.anonymous_consumer);
    }
    if (conf.hide_credentials) ctx.setRequestHeader('Authorization', undefined);
    ctx.attachConsumer(found.consumer, found.credentialId);
    return undefined;
  },
};
