/**
 * The `resolver` directive's settings (`127.0.0.1[:53] [::1] valid=30s
 * ipv6=off`) and what a lookup gives back, shared by the resolver and the
 * modules that use it.
 */
import net from 'node:net';

export interface ResolverConf {
  servers: { host: string; port: number }[];
  /** `valid=` in ms, overriding answer TTLs. */
  validMs?: number;
  ipv4: boolean;
  ipv6: boolean;
}

/** A failed lookup, with nginx's code and text (`(3: Host not found)`). */
export class ResolveError extends Error {
  readonly code: number;
  /** When to ask again (ms): nginx's ctx->valid for an error, `valid=` or 10 s. */
  valid = 0;
  constructor(code: number, text: string) {
    super(text);
    this.code = code;
  }
}

/** Addresses and until when they hold (ms, nginx's ctx->valid). */
export interface Resolved {
  addrs: string[];
  valid: number;
}

/** Parses `resolver` arguments: `127.0.0.1[:53] [::1] valid=30s ipv6=off`. */
export function parseResolverArgs(args: string[], parseTimeMs: (s: string) => number): ResolverConf | string {
  const conf: ResolverConf = { servers: [], ipv4: true, ipv6: true };
  for (const a of args) {
    if (a.startsWith('valid=')) {
      const ms = parseTimeMs(a.slice(6));
      if (Number.isNaN(ms)) return `invalid parameter "${a}"`;
      conf.validMs = ms;
    } else if (a.startsWith('ipv6=')) {
      conf.ipv6 = a.slice(5) === 'on';
    } else if (a.startsWith('ipv4=')) {
      conf.ipv4 = a.slice(5) === 'on';
    } else if (a.startsWith('status_zone=')) {
      /* accepted */
    } else {
      const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(a) ?? /^([^:]+)(?::(\d+))?$/.exec(a);
      if (!m || !net.isIP(m[1])) return `invalid parameter "${a}"`;
      conf.servers.push({ host: m[1], port: m[2] ? Number(m[2]) : 53 });
    }
  }
  return conf;
}
