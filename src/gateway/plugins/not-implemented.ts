/**
 * The phase functions of a plugin the gateway knows only by its schema:
 * the Admin API checks and stores its conf as APISIX does, but the data
 * plane does not do what the plugin would (docs/gateway.md, "Plugins known
 * by their schema only"). Such a plugin guards the request (no LDAP bind,
 * no CSRF token, no gRPC transcoding): a request that would run it is
 * refused with 500 and a body that says so, never passed on as if the
 * plugin had acted.
 */
import type { PhaseFunctions } from './phase-api.ts';

export function notImplemented(name: string): PhaseFunctions<object> {
  return {
    rewrite() {
      return { status: 500, body: { error_msg: `plugin ${name} is not implemented by this gateway (its configuration is accepted by the Admin API only)` } };
    },
  };
}
