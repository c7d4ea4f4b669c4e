/**
 * The Admin API's read-only views of plugins and schemas
 * (apisix/admin/plugins.lua, schema.lua): `/plugins/list`,
 * `/plugins/{name}`, `/plugins/reload`, `/schema/{resource}`,
 * `/schema/plugins/{name}`, `/schema/validate/{collection}`.
 */
import { validate } from '../schema/validate.ts';
import type { AdminContext, AdminResponse } from './context.ts';
import { resources, schemaNames } from './index.ts';

const json = (status: number, body: unknown): AdminResponse => ({ status, body, apiVersion: true });

export function pluginsList(ctx: AdminContext, method: string, args: URLSearchParams): AdminResponse | undefined {
  if (method !== 'GET') return undefined;
  const subsystem = args.get('subsystem') ?? 'http';
  if (subsystem === 'stream') return { status: 200, body: [] };
  if (subsystem !== 'http') return { status: 400, body: 'invalid subsystem passed' };
  return { status: 200, body: ctx.plugins.names() };
}

export function pluginsReload(method: string): AdminResponse {
  if (method === 'PUT') return { status: 200, body: 'done' };
  return { status: 405, body: { error_msg: `please use PUT method to reload the plugins, ${method} method is not allowed.` } };
}

/** GET /plugins/{name} and /schema/plugins/{name}. */
export function pluginSchema(ctx: AdminContext, method: string, name: string | undefined, args: URLSearchParams): AdminResponse {
  if (method !== 'GET') return { status: 404, body: { error_msg: 'not found' } };
  const subsystem = args.get('subsystem') ?? 'http';
  if (subsystem !== 'http' && subsystem !== 'stream') return json(400, { error_msg: `unsupported subsystem: ${subsystem}` });
  if (name === undefined) {
    if (args.get('all') !== 'true') return json(400, { error_msg: 'not found plugin name' });
    const all: Record<string, unknown> = {};
    for (const n of ctx.plugins.names()) {
      const p = ctx.plugins.get(n)!;
      all[n] = { schema: ctx.plugins.schemaOf(n, 'route'), priority: p.priority, version: p.version, ...(p.type ? { type: p.type } : {}),
        ...(p.consumerSchema ? { consumer_schema: ctx.plugins.schemaOf(n, 'consumer') } : {}),
        ...(p.metadataSchema ? { metadata_schema: p.metadataSchema } : {}) };
    }
    return json(200, all);
  }
  const type = args.get('schema_type') === 'consumer' ? 'consumer' : 'route';
  const schema = subsystem === 'http' ? ctx.plugins.schemaOf(name, type) : undefined;
  if (!schema) return json(404, { error_msg: `plugin not found in subsystem ${subsystem}` });
  return json(200, schema);
}

/** GET /schema/{name}. */
export function resourceSchema(method: string, name: string | undefined): AdminResponse {
  if (method !== 'GET') return { status: 404, body: { error_msg: 'not found' } };
  const r = name !== undefined ? resources[schemaNames[name]] : undefined;
  if (!r) return json(400, { error_msg: `not found schema: ${name ?? ''}` });
  return json(200, r.def.schema);
}

/** POST /schema/validate/{collection}: the schema only, its raw message. */
export function validateAgainst(method: string, collection: string | undefined, body: unknown): AdminResponse {
  if (method !== 'POST') return { status: 404, body: { error_msg: 'not found' } };
  const r = collection !== undefined ? resources[collection] : undefined;
  if (!r) return json(404, { error_msg: `Unsupported resource type: ${collection ?? ''}` });
  const err = validate(r.def.schema, body);
  return err ? json(400, { error_msg: err }) : json(200, undefined);
}
