/**
 * The gateway's plugins as the Admin API sees them: name, priority, type
 * and schemas (route, consumer, metadata), in APISIX's shape
 * (docs/reference style: one file per plugin under src/gateway/plugins/).
 * Checks a `plugins` object with APISIX's messages (apisix/plugin.lua).
 */
import { validate } from '../schema/validate.ts';
import type { Schema } from '../schema/validate.ts';
import { mapField } from '../data-encryption.ts';
import type { PhaseFunctions } from './phase-api.ts';
import { withDefaults } from '../dataplane/plugin-chain.ts';

/** A plugin: APISIX's name, priority and schemas, and the phase functions it runs on the request path. */
export interface GatewayPlugin<C extends object = object> extends PhaseFunctions<C> {
  name: string;
  version: number;
  priority: number;
  type?: 'auth';
  schema: Schema;
  consumerSchema?: Schema;
  metadataSchema?: Schema;
  /** The consumer field that identifies a consumer (unique across consumers and credentials). */
  consumerKeyField?: string;
  /** APISIX's check_schema rewording what the schema found (the route schema's message → the plugin's own). */
  schemaMessage?(conf: Record<string, unknown>, err: string): string;
  /** Fields stored encrypted (APISIX's `encrypt_fields`), of the consumer schema when there is one. */
  encryptFields?: string[];
}

/** A plugin's stored metadata object, by plugin name (for checks that fall back on it). */
export type MetadataReader = (name: string) => Promise<Record<string, unknown> | undefined>;

export type SchemaType = 'route' | 'consumer' | 'metadata';

/** Every plugin conf may carry `_meta` (apisix/schema_def.lua plugin_injected_schema). */
const META: Schema = {
  type: 'object',
  properties: {
    disable: { type: 'boolean' },
    error_response: { oneOf: [{ type: 'string' }, { type: 'object' }] },
    priority: { description: 'priority of plugins by customized order', type: 'integer' },
    filter: { description: 'filter determines whether the plugin needs to be executed at runtime', type: 'array' },
    pre_function: { description: 'function to be executed in each phase before execution of plugins. The pre_function will have access to two arguments: `conf` and `ctx`.', type: 'string' },
  },
  additionalProperties: false,
};

/** The schema as APISIX returns and checks it: `_meta` injected, with its mark. */
function injected(schema: Schema): Schema {
  const props = { ...(schema.properties as Record<string, Schema> | undefined), _meta: META };
  return { ...schema, $comment: 'this is a mark for our injected plugin schema', properties: props };
}

export class PluginRegistry {
  private readonly byName = new Map<string, GatewayPlugin>();
  private readonly routeSchemas = new Map<string, Schema>();

  constructor(plugins: GatewayPlugin[], enabled?: string[]) {
    for (const p of plugins) {
      if (enabled && !enabled.includes(p.name)) continue;
      this.byName.set(p.name, p);
      this.routeSchemas.set(p.name, injected(p.schema));
    }
  }

  get(name: string): GatewayPlugin | undefined {
    return this.byName.get(name);
  }

  /** Names by priority, highest first (`/plugins/list`). */
  names(): string[] {
    return [...this.byName.values()].sort((a, b) => b.priority - a.priority).map((p) => p.name);
  }

  /** The schema `/plugins/{name}` returns. */
  schemaOf(name: string, type: SchemaType): Schema | undefined {
    const p = this.byName.get(name);
    if (!p) return undefined;
    // APISIX's consumer schemas carry their `encrypt_fields` (ajv ignores the keyword)
    if (type === 'consumer') return p.consumerSchema ? { ...p.consumerSchema, ...(p.encryptFields ? { encrypt_fields: p.encryptFields } : {}) } : this.routeSchemas.get(name);
    if (type === 'metadata') return p.metadataSchema;
    return this.routeSchemas.get(name);
  }

  /**
   * Applies `fn` to the secret fields of each plugin conf in `plugins`
   * (APISIX's encrypt_conf / decrypt_conf); the fields are declared on the
   * consumer schema, which route confs of the same plugin do not have.
   */
  mapSecrets(plugins: unknown, type: SchemaType, fn: (v: string) => string | undefined): void {
    if (!plugins || typeof plugins !== 'object') return;
    for (const [name, conf] of Object.entries(plugins as Record<string, unknown>)) {
      const p = this.byName.get(name);
      if (!p?.encryptFields || !conf || typeof conf !== 'object') continue;
      if (type !== 'consumer' && p.consumerSchema) continue;
      for (const f of p.encryptFields) mapField(conf as Record<string, unknown>, f, fn);
    }
  }

  /** Checks every conf of a `plugins` object: undefined, or APISIX's message. */
  check(plugins: Record<string, unknown>, type: SchemaType): string | undefined {
    for (const [name, conf] of Object.entries(plugins)) {
      const plugin = this.byName.get(name);
      if (!plugin) return `unknown plugin [${name}]`;
      if (conf === null || typeof conf !== 'object' || Array.isArray(conf)) return `invalid plugin conf ${JSON.stringify(conf)} for plugin [${name}]`;
      const c = conf as Record<string, unknown>;
      // a disabled plugin is accepted even when its conf would not be
      if ((c._meta as { disable?: boolean } | undefined)?.disable === true) continue;
      const schema = type === 'consumer' && plugin.consumerSchema ? plugin.consumerSchema : this.routeSchemas.get(name)!;
      const own = type === 'consumer' ? withoutMeta(c) : c;
      const invalid = validate(schema, own);
      const err = (invalid && plugin.schemaMessage && type !== 'consumer' ? plugin.schemaMessage(c, invalid) : invalid) ?? (type === 'consumer' ? plugin.checkConsumerConf?.(withDefaults(schema, own)) : undefined);
      if (err) return `failed to check the configuration of plugin ${name} err: ${err}`;
    }
    return undefined;
  }

  /** After `check`: what the plugins check beyond their schemas (Lua that must compile). */
  checkFurther(plugins: Record<string, unknown>, metadataOf?: MetadataReader): Promise<string | undefined> {
    return checkFurther(this.byName, plugins, metadataOf);
  }
}

/** The plugins' checks beyond their schemas (APISIX's check_schema), for confs the schemas accepted. */
async function checkFurther(byName: Map<string, GatewayPlugin>, plugins: Record<string, unknown>, metadataOf?: MetadataReader): Promise<string | undefined> {
  for (const [name, conf] of Object.entries(plugins)) {
    const plugin = byName.get(name);
    const c = conf as Record<string, unknown>;
    if (!plugin?.checkConf || (c._meta as { disable?: boolean } | undefined)?.disable === true) continue;
    const err = await plugin.checkConf(withDefaults(plugin.schema, c), () => metadataOf?.(name) ?? Promise.resolve(undefined));
    if (err) return `failed to check the configuration of plugin ${name} err: ${err}`;
  }
  return undefined;
}

function withoutMeta(c: Record<string, unknown>): Record<string, unknown> {
  if (!('_meta' in c)) return c;
  const { _meta, ...rest } = c;
  return rest;
}
