/**
 * key-auth (apisix/plugins/key-auth.lua): the key from the `header`, else
 * the `query` argument, names the consumer whose key-auth `key` it is;
 * `hide_credentials` keeps it from the upstream.
 */
import { authFailed, realmSchema } from './auth-answer.ts';
import type { GatewayPlugin } from './registry.ts';

interface KeyAuthConf { header: string; query: string; hide_credentials: boolean; realm: string; anonymous_consumer?: string }

export const keyAuth: GatewayPlugin<KeyAuthConf> = {
  name: 'key-auth', version: 0.1, priority: 2500, type: 'auth',
  schema: {
    type: 'object',
    properties: {
      header: { type: 'string', default: 'apikey' },
      query: { type: 'string', default: 'apikey' },
      hide_credentials: { type: 'boolean', default: false },
      realm: realmSchema('key'),
      anonymous_consumer: { type: 'string', minLength: 1 },
    },
  },
  consumerSchema: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
  encryptFields: ['key'],
  consumerKeyField: 'key',
  rewrite(conf, ctx) {
    const challenge = `apikey realm="${conf.realm}"`;
    let key = ctx.header(conf.header);
    const fromHeader = key !== undefined;
    key ??= ctx.arg(conf.query);
    const hide = (): void => {
      if (!conf.hide_credentials) return;
      if (ctx.header(conf.header) !== undefined) ctx.setRequestHeader(conf.header, undefined);
      if (ctx.arg(conf.query) !== undefined) ctx.removeArg(conf.query);
    };
    if (key === undefined) return authFailed(ctx, challenge, 'Missing API key in request', conf.anonymous_consumer);
    const found = ctx.findConsumer('key-auth', 'key', key);
    if (!found) {
      if (conf.anonymous_consumer !== undefined) hide();
      return authFailed(ctx, challenge, 'Invalid API key in request', conf.anonymous_consumer);
    }
    if (conf.hide_credentials) {
      if (fromHeader) ctx.setRequestHeader(conf.header, undefined);
      else ctx.removeArg(conf.query);
    }
    ctx.attachConsumer(found.consumer, found.credentialId);
    return undefined;
  },
};
