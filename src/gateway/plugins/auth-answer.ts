/**
 * What APISIX's auth plugins share: the `realm` schema, the auth conf of
 * the consumer or credential a lookup found, and what they do when a
 * request brings no valid credential: 401 with their realm in
 * WWW-Authenticate, unless `anonymous_consumer` names a consumer to attach
 * instead (an unknown one is 401 "Invalid user authorization").
 */
import type { Schema } from '../schema/validate.ts';
import type { Consumer } from '../router/config-view.ts';
import type { PluginAnswer, PluginContext } from './phase-api.ts';

/** apisix/schema_def.lua get_realm_schema: printable ASCII but `"` and `\`. */
export function realmSchema(fallback: string): Schema {
  return { type: 'string', pattern: '^[\\x20-\\x21\\x23-\\x5B\\]-\\x7E]+$', default: fallback, minLength: 1, maxLength: 128 };
}

/** The `plugin` conf of what findConsumer found: the consumer's own, or its credential's. */
export function authConfOf(found: { consumer: Consumer; credentialId: string | undefined }, plugin: string): Record<string, unknown> | undefined {
  const plugins = found.credentialId === undefined ? found.consumer.plugins : found.consumer.credentials.find((c) => c.id === found.credentialId)?.plugins;
  return plugins?.[plugin] as Record<string, unknown> | undefined;
}

export function authFailed(ctx: PluginContext, challenge: string, message: string, anonymous: string | undefined): PluginAnswer | undefined {
  if (anonymous !== undefined) {
    const c = ctx.consumerByName(anonymous);
    if (c) {
      ctx.attachConsumer(c, undefined);
      return undefined;
    }
    message = 'Invalid user authorization';
  }
  return { status: 401, body: { message }, headers: { 'WWW-Authenticate': challenge } };
}
