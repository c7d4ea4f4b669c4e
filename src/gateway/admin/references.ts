/**
 * Checks between objects: a referenced object must exist when a body
 * names it (`failed to fetch upstream info by upstream id [1], response
 * code: 404`), and an object still referenced may not be deleted (`can not
 * delete this upstream, route [1] is still using it now`). Read from the
 * store itself, so unlike APISIX's synced copy they are never stale.
 */
import type { AdminContext } from './context.ts';

/** `failed to fetch <what> info by <what> id [<id>], response code: 404`, or undefined when it exists. */
export async function mustExist(ctx: AdminContext, dir: string, what: string, id: unknown): Promise<string | undefined> {
  if (id === undefined || ctx.skipReferences) return undefined;
  const kv = await ctx.store.get(`${ctx.settings.keyPrefix}/${dir}/${id}`);
  return kv ? undefined : `failed to fetch ${what} info by ${what} id [${id}], response code: 404`;
}

/** The first object of `dirs` whose `field` names `id`: `route [1]`. */
export async function firstReferrer(ctx: AdminContext, dirs: Array<[dir: string, kind: string]>, field: string, id: string): Promise<string | undefined> {
  for (const [dir, kind] of dirs) {
    const { kvs } = await ctx.store.list(`${ctx.settings.keyPrefix}/${dir}/`);
    for (const kv of kvs) {
      const v = JSON.parse(kv.value) as Record<string, unknown>;
      if (v[field] !== undefined && String(v[field]) === id) return `${kind} [${v.id ?? kv.key.slice(kv.key.lastIndexOf('/') + 1)}]`;
    }
  }
  return undefined;
}

/** Checks a `plugins` object of a route, service, global rule or plugin config: schemas, then the plugins' own checks. */
export async function checkPlugins(ctx: AdminContext, plugins: unknown): Promise<string | undefined> {
  if (plugins === undefined) return undefined;
  const metadataOf = async (name: string) => {
    const kv = await ctx.store.get(`${ctx.settings.keyPrefix}/plugin_metadata/${name}`);
    return kv ? JSON.parse(kv.value) as Record<string, unknown> : undefined;
  };
  return ctx.plugins.check(plugins as Record<string, unknown>, 'route') ?? await ctx.plugins.checkFurther(plugins as Record<string, unknown>, metadataOf);
}
