/**
 * The phase functions of a plugin the gateway knows only by its schema:
 * the Admin API checks and stores its conf as APISIX does, but the data
 * plane does not do what the plugin would (no LDAP bind, no log shipping,
 * no gRPC transcoding, no CSRF token). A request that would run it is
 * refused with 500 and a body that says so, never passed on as if the
 * plugin had acted (docs/gateway.md, "Plugins known by their schema only").
 */
import type { PhaseFunctions } from './phase-api.ts';

export function notImplemented(name: string): PhaseFunctions<object> {
  return {
    rewrite() {
      return { status: 500, body: { error_msg: `plugin ${name} is not implemented by this gateway (its configuration is accepted by the Admin API only)` } };
    },
  };
}
