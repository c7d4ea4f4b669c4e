/**
 * SRV lookups for upstream `server name service=… resolve` (nginx's
 * ngx_resolve_name with ctx->service): the records of `_service._tcp.name`
 * (or `service.name` when the service has a dot), then every target's
 * addresses, each with its record's port, priority and weight
 * (ngx_resolver_srv_names_handler, ngx_resolver_report_srv).
 */
import { dnsErrorText } from './dns-message.ts';
import { ResolveError } from './resolver-conf.ts';
import type { Resolver } from './resolver.ts';

export interface ServiceAddr {
  ip: string;
  port: number;
  /** The SRV target it came from. */
  name: string;
  priority: number;
  weight: number;
}

/** A target that could not be resolved (logged by the caller, as nginx logs it). */
export interface ServiceFailure {
  name: string;
  code: number;
}

export interface ServiceAnswer {
  addrs: ServiceAddr[];
  /** Until when the answer holds (ms): the smallest of the SRV and target answers. */
  valid: number;
  failed: ServiceFailure[];
}

/** No address at all: the error nginx reports for the service, with the targets that failed. */
export class ServiceError extends ResolveError {
  failed: ServiceFailure[] = [];
}

export function serviceName(host: string, service: string): string {
  return service.includes('.') ? `${service}.${host}` : `_${service}._tcp.${host}`;
}

export function resolveService(res: Resolver, host: string, service: string, timeoutMs: number): Promise<ServiceAnswer> {
  return new Promise((resolve, reject) => {
    res.lookupSrv(serviceName(host, service), timeoutMs, (srvs, valid) => {
      // every target, each lookup with its own timeout
      Promise.all(srvs.map((srv) => res.resolveValid(srv.name, timeoutMs).then(
        (r) => ({ srv, addrs: r.addrs, valid: r.valid, code: 0 }),
        (e: unknown) => ({ srv, addrs: [] as string[], valid: Infinity, code: e instanceof ResolveError ? e.code : 2 }),
      ))).then((results) => {
        let until = valid;
        const addrs: ServiceAddr[] = [];
        const failed: ServiceFailure[] = [];
        for (const x of results) {
          if (x.code) failed.push({ name: x.srv.name, code: x.code });
          else until = Math.min(until, x.valid);
          for (const ip of x.addrs) addrs.push({ ip, port: x.srv.port, name: x.srv.name, priority: x.srv.priority, weight: x.srv.weight });
        }
        if (addrs.length) {
          resolve({ addrs, valid: until, failed });
          return;
        }
        // nginx: the first target's error, "Host not found" if any target had it
        const code = results.some((x) => x.code === 3) ? 3 : results[0].code || 3;
        const e = new ServiceError(code, dnsErrorText(code));
        e.valid = Date.now() + (res.conf.validMs || 10_000);
        e.failed = failed;
        reject(e);
      }, reject);
    }, reject);
  });
}
