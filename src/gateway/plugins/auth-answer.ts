/**
 * What APISIX's auth plugins do when a request brings no valid
 * credential: 401 with their realm in WWW-Authenticate, unless
 * `anonymous_consumer` names a consumer to attach instead (an unknown one
 * is 401 "Invalid user authorization").
 */
import type { PluginAnswer, PluginContext } from './phase-api.ts';

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
