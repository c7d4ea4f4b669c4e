/**
 * The phase functions of a plugin the gateway knows only by its schema:
 * the Admin API checks and stores its conf as APISIX does, but the data
 * plane does not do what the plugin would (docs/gateway.md, "Plugins known
 * by their schema only"). Two kinds:
 *
 * - a plugin that guards the request (no LDAP bind, no CSRF token, no gRPC
 *   transcoding): a request that would run it is refused with 500 and a body
 *   that says so, never passed on as if the plugin had acted;
 * - a logger (http-logger, udp-logger): the request is served, since a route
 *   or global rule with a logger must not stop traffic, and the error log
 *   says once per route that its entries are not sent.
 */
import type { PhaseFunctions } from './phase-api.ts';

let warn: (msg: string) => void = () => undefined;

/** Where the loggers' warning goes (the gateway runtime's error log). */
export function setSchemaOnlyLog(log: (msg: string) => void): void {
  warn = log;
}

export function notImplemented(name: string): PhaseFunctions<object> {
  return {
    rewrite() {
      return { status: 500, body: { error_msg: `plugin ${name} is not implemented by this gateway (its configuration is accepted by the Admin API only)` } };
    },
  };
}

export function logsNotSent(name: string): PhaseFunctions<object> {
  // route keys already warned of; bounded: one entry per route that carries the logger
  const warned = new Set<string>();
  return {
    log(_conf, ctx) {
      if (warned.has(ctx.routeKey)) return;
      if (warned.size > 10_000) warned.clear();
      warned.add(ctx.routeKey);
      warn(`plugin ${name} is not implemented by this gateway: the log entries of ${ctx.route ? `route ${ctx.route.id}` : 'global rules'} are not sent`);
    },
  };
}
