/**
 * `POST /gateway/admin/configs/validate` (apisix/admin/config_validate.lua):
 * a whole declarative configuration (`{"routes": [...], "upstreams": [...]}`,
 * as apisix.yaml holds it) checked item by item with each collection's
 * checker, references to other objects skipped, duplicate ids found; every
 * error is collected. Nothing is written.
 */
import type { AdminContext, AdminResponse } from './context.ts';
import { resources } from './index.ts';

/** The collections of a configuration, in the order their errors are listed. */
const COLLECTIONS = ['routes', 'services', 'upstreams', 'consumers', 'ssls', 'global_rules', 'plugin_configs',
  'plugin_metadata', 'consumer_groups', 'secrets', 'protos', 'stream_routes'];

interface ItemError { resource_type: string; resource_id?: unknown; index?: number; error: string }

async function checkOne(ctx: AdminContext, key: string, item: Record<string, unknown>): Promise<string | undefined> {
  const id = item.id === undefined ? '' : String(item.id);
  if (key === 'consumers' && id.includes('/credentials/')) {
    return resources.credentials.checkItem(item, ctx, id.split('/')[0] + '/');
  }
  if (key === 'secrets' && !id.includes('/')) return `invalid secret id: ${id}`;
  return resources[key].checkItem(item, ctx);
}

export async function validateConfigs(ctx: AdminContext, method: string, body: unknown, bodyLength: number): Promise<AdminResponse> {
  if (method !== 'POST') return { status: 404, body: { error_msg: 'not found' } };
  if (bodyLength === 0 || body === undefined) return { status: 400, body: { error_msg: 'invalid request body: empty request body' } };
  const errors: ItemError[] = [];
  const conf = (body !== null && typeof body === 'object' ? body : {}) as Record<string, unknown>;
  for (const key of COLLECTIONS) {
    const version = conf[`${key}_conf_version`];
    if (version !== undefined && typeof version !== 'number') {
      errors.push({ resource_type: key, error: `${key}_conf_version must be a number, got ${typeof version}` });
    }
    const items = conf[key];
    if (!Array.isArray(items)) continue;
    const seen = new Set<string>();
    for (const [index, item] of items.entries()) {
      const obj = (item ?? {}) as Record<string, unknown>;
      const resourceId = obj.id ?? obj.username ?? '';
      const err = await checkOne({ ...ctx, skipReferences: true }, key, obj);
      if (err) errors.push({ resource_type: key, resource_id: resourceId, index, error: err });
      const ident = key === 'consumers' ? obj.id ?? obj.username : obj.id;
      if (ident === undefined || ident === null) continue;
      const idType = key === 'consumers' ? (obj.id !== undefined ? 'credential id' : 'username') : 'id';
      if (seen.has(String(ident))) {
        errors.push({ resource_type: key, resource_id: resourceId, index, error: `found duplicate ${idType} ${String(ident)} in ${key}` });
      }
      seen.add(String(ident));
    }
  }
  if (errors.length) return { status: 400, body: { error_msg: 'Configuration validation failed', errors } };
  return { status: 200, body: {} };
}
