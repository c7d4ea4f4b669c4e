/**
 * APISIX's core.utils.resolve_var: `$name` (letters, digits, `_`, `.`) or
 * `${ name }` (spaces allowed) becomes the request variable, empty when it
 * is unset unless `${name ?? default}` gives one; `\$` keeps the dollar
 * (the backslash stays, as APISIX's pattern only skips the match).
 * `escape`, as resolve_var's escaper, applies to each variable's value.
 */
import type { PluginContext } from './phase-api.ts';

const PATTERN = /(?<!\\)\$(?:\{\s*([^}]+?)\s*\}|([\w.]+))/g;

export function resolveVar(template: string, ctx: Pick<PluginContext, 'variable'>, escape?: (value: string) => string): string {
  if (!template.includes('$')) return template;
  return template.replace(PATTERN, (_m, braced: string | undefined, plain: string | undefined) => {
    const segs = (braced ?? plain!).split(/\s*\?\?\s*/);
    const v = ctx.variable(segs[0]) ?? (segs.length > 1 ? segs[1] : undefined);
    if (v === undefined) return '';
    return escape ? escape(v) : v;
  });
}
