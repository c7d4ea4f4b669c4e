/**
 * The directive registry's vocabulary: where a directive may appear, how many
 * arguments it takes, and the handler that turns arguments into typed config.
 * Mirrors ngx_command_t.
 */
import type { ConfNode } from './parser.ts';
import type { ConfContext } from './context.ts';

/** Contexts a directive is allowed in (bit mask, like NGX_*_CONF). */
export const Ctx = {
  MAIN: 1 << 0,
  EVENTS: 1 << 1,
  HTTP: 1 << 2,
  SERVER: 1 << 3,
  LOCATION: 1 << 4,
  UPSTREAM: 1 << 5,
  /** `if` inside server */
  SIF: 1 << 6,
  /** `if` inside location */
  LIF: 1 << 7,
  /** `limit_except` */
  LMT: 1 << 8,
  STREAM: 1 << 9,
  STREAM_SERVER: 1 << 10,
  STREAM_UPSTREAM: 1 << 11,
} as const;

/** The usual `http, server, location` triple. */
export const HTTP_ANY = Ctx.HTTP | Ctx.SERVER | Ctx.LOCATION;

export type ContextName = keyof typeof Ctx;

export interface Directive {
  name: string;
  /** Bit mask of Ctx values. */
  contexts: number;
  /** Argument count: a number, [min, max], or 'flag' for on|off. max may be Infinity. */
  args: number | readonly [number, number] | 'flag';
  /** A block directive: `name args { ... }`. */
  block?: boolean;
  /**
   * Applies the directive. Return a string to fail with nginx's
   * `"name" directive <string>` message, or throw cf.error(...) for a full message.
   */
  handler(cf: ConfContext, node: ConfNode): void | string;
}

/** The nginx argument-count check; returns whether `count` is allowed. */
export function argsAllowed(spec: Directive['args'], count: number): boolean {
  if (spec === 'flag') return count === 1;
  if (typeof spec === 'number') return count === spec;
  return count >= spec[0] && count <= spec[1];
}
