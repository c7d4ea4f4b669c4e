/**
 * nginx's ngx_conf_set_*_slot family, written once: directive handlers that
 * store a parsed value in one field of a module's slot. The setter owns the
 * common error (nginx's `"name" directive is duplicate`, checked before the
 * value is parsed, as nginx does); the parser (src/conf/values.ts) owns the
 * value's errors. A module row then reads like nginx's command table:
 *
 *   { name: 'gzip_vary', contexts: HTTP_ANY, args: 'flag', handler: setting(gzipSlot, 'vary', flagArg) }
 *
 *   setting(slot, field, parse)   one value, once per level          (flag, num, size, msec, sec, enum, str, path)
 *   unique(slot, field, apply)    once per level, stored by `apply`  (several fields, or several arguments)
 *   listOf(slot, field, parse)    each line adds an item; a level with its own list inherits none of the
 *                                 parent's (nginx's "if (conf->x == NGX_CONF_UNSET_PTR) conf->x = prev->x")
 *
 * What a merge fills in comes from the slot (defineSlot's merge and defaults).
 */
import type { ConfContext, ConfSlot } from './context.ts';
import type { Directive } from './directive.ts';
import type { ConfNode } from './parser.ts';

type Handler = Directive['handler'];

/**
 * Where a setter stores: a slot on the current level, or for a part of one
 * (a nested object such as `events {}`'s settings), the function that finds it.
 */
export type Target<R> = ConfSlot<R, unknown> | ((cf: ConfContext) => R);

function confOf<R>(cf: ConfContext, target: Target<R>): R {
  return typeof target === 'function' ? target(cf) : cf.get(target);
}

/**
 * A value parser: the directive's first argument (and all of them, for the
 * few that read more) to a typed value; throws nginx's message when invalid.
 */
export type Parse<T> = (cf: ConfContext, value: string, args: readonly string[]) => T;

/** The "is duplicate" test nginx's setters make: the field is already set on this level. */
function isSet(conf: object, field: PropertyKey): boolean {
  return (conf as Record<PropertyKey, unknown>)[field] !== undefined;
}

/** ngx_conf_set_*_slot: `"name" directive is duplicate` when this level set `field` already, else stores `parse`'s value. */
export function setting<R, K extends keyof R>(target: Target<R>, field: K, parse: Parse<R[K]>): Handler {
  return (cf, node) => {
    const conf = confOf(cf, target);
    if (isSet(conf as object, field)) return 'is duplicate';
    conf[field] = parse(cf, node.args[0], node.args);
    return undefined;
  };
}

/**
 * A setting that stores more than one value (`keepalive_timeout 75s 60s`
 * sets two fields): the duplicate check on `field`, then `apply`, which may
 * return a string for nginx's `"name" directive <string>` as handlers do.
 */
export function unique<R>(target: Target<R>, field: keyof R, apply: (cf: ConfContext, node: ConfNode, conf: R) => string | void): Handler {
  return (cf, node) => {
    const conf = confOf(cf, target);
    if (isSet(conf as object, field)) return 'is duplicate';
    return apply(cf, node, conf);
  };
}

type NumberField<R> = { [K in keyof R]-?: R[K] extends number | undefined ? K : never }[keyof R];

/**
 * ngx_conf_set_bitmask_slot (`*_next_upstream`, `*_ignore_headers`): each
 * word sets its bit (`bitOf` undefined: `invalid value`), a word already set
 * only warns `duplicate value`, and a second line at the same level adds its
 * bits to the first's; `settle` may normalise the result (`off`).
 */
export function bitmask<R>(target: Target<R>, field: NumberField<R>, bitOf: (word: string) => number | undefined,
  settle: (mask: number) => number = (m) => m): Handler {
  return (cf, node) => {
    const conf = confOf(cf, target) as Record<NumberField<R>, number | undefined>;
    let mask = conf[field] ?? 0;
    for (const w of node.args) {
      const bit = bitOf(w);
      if (bit === undefined) throw cf.error(`invalid value "${w}"`);
      if (bit !== 0 && mask & bit) cf.warn(`duplicate value "${w}"`);
      mask |= bit;
    }
    conf[field] = settle(mask);
    return undefined;
  };
}

type ItemOf<L> = L extends readonly (infer I)[] ? I : never;

/**
 * A list directive (add_header, proxy_set_header, error_log…): each line
 * adds its item to this level's list. Because the list is created by the
 * level's own first line, the usual merge (inheritUnset) gives a level with
 * its own list none of the parent's: nginx's rule for these directives.
 */
export function listOf<R, K extends keyof R>(target: Target<R>, field: K, parse: (cf: ConfContext, node: ConfNode) => ItemOf<NonNullable<R[K]>>): Handler {
  return (cf, node) => {
    const conf = confOf(cf, target);
    // own property only: a list reached through a prototype or a merge is the parent's
    const list = Object.hasOwn(conf as object, field) ? conf[field] as unknown[] | undefined : undefined;
    const item = parse(cf, node);
    if (list === undefined) conf[field] = [item] as R[K];
    else list.push(item);
    return undefined;
  };
}
