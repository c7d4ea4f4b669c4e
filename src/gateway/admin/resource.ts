/**
 * One Admin API collection, generically (apisix/admin/resource.lua): GET
 * one or a list, PUT with or without id, POST with a generated id, PATCH
 * (merge or sub-path), DELETE with reference checks and `force`. A
 * collection file (routes.ts, upstreams.ts, ...) says only what is special
 * about it, through the hooks of ResourceDef.
 */
import { StoreError } from '../store/store.ts';
import type { KeyValue } from '../store/store.ts';
import { validate } from '../schema/validate.ts';
import type { Schema } from '../schema/validate.ts';
import type { SchemaType } from '../plugins/registry.ts';
import type { Keyring } from '../data-encryption.ts';
import { badRequest, notFound, unavailable } from './context.ts';
import type { AdminContext, AdminResponse } from './context.ts';
import { listResponse } from './list.ts';
import { mergePatch, patchSubPath } from './patch.ts';

export type Method = 'get' | 'put' | 'post' | 'patch' | 'delete';
export type Conf = Record<string, unknown>;

export interface ResourceDef {
  /** URL segment and storage directory: `routes`. */
  name: string;
  /** In messages: `route`, `stream route`. */
  kind: string;
  schema: Schema;
  unsupported?: Method[];
  /** The identity is not an `id` (consumers: username; plugin_metadata: the plugin name). */
  noId?: boolean;
  /** Semantic checks after the schema (references, plugins): an error message or undefined. */
  check?(conf: Conf, ctx: AdminContext, id: string | undefined, subPath: string): Promise<string | undefined> | string | undefined;
  /** Checks before the schema (APISIX's `only one of host or hosts is allowed`). */
  preCheck?(conf: Conf, id: string | undefined): string | undefined;
  /** The schema, when it depends on the id (plugin_metadata: the plugin's; secrets: the manager's). */
  schemaFor?(id: string | undefined, ctx: AdminContext): Schema | undefined;
  /** Refuses a DELETE unless `force=true`: `can not delete this upstream, route [1] is still using it now`. */
  deleteCheck?(id: string, ctx: AdminContext): Promise<string | undefined>;
  /** The storage key below the prefix for an id (default `/<name>/<id>`). */
  keyOf?(id: string, subPath: string): string;
  /** For `noId` collections: the value stores its identity as `id`, and no create/update times (plugin_metadata). */
  idInValue?: boolean;
  /** For `noId` collections: the identity of a checked body (consumers: `username`). */
  identity?(conf: Conf, urlId: string | undefined): string | undefined;
  /** Fields removed from GET answers (ssl private keys). */
  hidden?: string[];
  /** Drops listing entries that are not of this collection (credentials under consumers). */
  listed?(kv: KeyValue): boolean;
  /** An empty listing answers 404 (APISIX lists credentials of a consumer by a prefix that may not exist). */
  emptyListNotFound?: boolean;
  /** `filter=` fields allowed in lists (routes: service_id, upstream_id). */
  filterFields?: string[];
  /** Which plugin schema the `plugins` confs follow (consumers and credentials: `consumer`). */
  pluginType?: SchemaType;
  /** Encrypts the collection's own secrets before storing (ssls: private keys). */
  encrypt?(conf: Conf, keyring: Keyring): void;
  /** Decrypts them again, for GET and for PATCH to merge into. */
  decrypt?(conf: Conf, keyring: Keyring): void;
  /** Runs before PUT writes (credentials: the consumer must exist). */
  beforePut?(key: string, ctx: AdminContext): Promise<AdminResponse | undefined>;
  /** Runs after a DELETE (consumers: their credentials go too). */
  afterDelete?(key: string, ctx: AdminContext): Promise<void>;
}

/** What a handler receives after the URL was split. */
export interface ResourceCall {
  method: Method;
  id: string | undefined;
  subPath: string;
  /** The decoded JSON body, undefined when there was none. */
  body: unknown;
  args: URLSearchParams;
}

const FORBIDDEN = ['create_time', 'update_time'];

function forbiddenProperty(conf: Conf): string | undefined {
  const at = (obj: unknown, where: string): string | undefined => {
    if (!obj || typeof obj !== 'object') return undefined;
    for (const f of FORBIDDEN) if ((obj as Conf)[f] !== undefined) return `the property is forbidden:  ${where}${f}`;
    return undefined;
  };
  return at(conf, '') ?? at(conf.upstream, 'upstream.') ?? at(conf.plugins, 'plugins.');
}

function isObject(v: unknown): v is Conf {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export class Resource {
  readonly def: ResourceDef;

  constructor(def: ResourceDef) {
    this.def = def;
  }

  key(ctx: AdminContext, id: string, subPath = ''): string {
    return ctx.settings.keyPrefix + (this.def.keyOf ? this.def.keyOf(id, subPath) : `/${this.def.name}/${id}`);
  }

  async handle(call: ResourceCall, ctx: AdminContext): Promise<AdminResponse> {
    if (this.def.unsupported?.includes(call.method)) {
      return { status: 405, body: { error_msg: `not supported \`${call.method.toUpperCase()}\` method for ${this.def.kind}` }, apiVersion: true };
    }
    try {
      switch (call.method) {
        case 'get': return await this.get(call, ctx);
        case 'put': return await this.put(call, ctx);
        case 'post': return await this.post(call, ctx);
        case 'patch': return await this.patch(call, ctx);
        case 'delete': return await this.remove(call, ctx);
      }
    } catch (e) {
      if (e instanceof StoreError) return unavailable(e.message);
      throw e;
    }
  }

  /**
   * APISIX's check_conf: id rules, forbidden timestamps, then the schema and
   * the collection's checks, on a copy (defaults are never written back).
   */
  async checkConf(id: string | undefined, conf: unknown, needId: boolean, ctx: AdminContext, allowTime = false, subPath = ''): Promise<{ id?: string; error?: string }> {
    if (conf === undefined || conf === null) return { error: 'missing configurations' };
    if (!isObject(conf)) return { error: 'invalid configuration: wrong type: expected object, got ' + (Array.isArray(conf) ? 'table' : typeof conf) };
    const kind = this.def.kind;
    if (!this.def.noId) {
      const bodyId = conf.id;
      const effective = id ?? (bodyId ?? undefined);
      if (needId && effective === undefined) return { error: `missing ${kind} id` };
      if (!needId && effective !== undefined) return { error: `wrong ${kind} id, do not need it` };
      if (needId && bodyId !== undefined && String(bodyId) !== String(effective)) return { error: `wrong ${kind} id` };
      if (effective !== undefined) conf.id = effective;
      id = effective === undefined ? undefined : String(effective);
    }
    if (!allowTime) {
      const err = forbiddenProperty(conf);
      if (err) return { error: err };
    }
    const copy = structuredClone(conf);
    const pre = this.def.preCheck?.(copy, id);
    if (pre) return { error: pre };
    const schema = this.def.schemaFor ? this.def.schemaFor(id, ctx) : this.def.schema;
    const schemaErr = schema && validate(schema, copy);
    if (schemaErr) return { error: `invalid configuration: ${schemaErr}` };
    const err = await this.def.check?.(copy, ctx, id, subPath);
    if (err) return { error: err };
    return { id: this.def.identity ? this.def.identity(copy, id) : id };
  }

  /**
   * The collection's own checker alone (no id rules, no forbidden
   * timestamps), as `/configs/validate` runs it on each item.
   */
  async checkItem(conf: unknown, ctx: AdminContext, subPath = ''): Promise<string | undefined> {
    if (!isObject(conf)) return 'invalid configuration: wrong type: expected object, got ' + (Array.isArray(conf) ? 'table' : typeof conf);
    const copy = structuredClone(conf);
    const id = copy.id === undefined ? undefined : String(copy.id);
    const pre = this.def.preCheck?.(copy, id);
    if (pre) return pre;
    const schema = this.def.schemaFor ? this.def.schemaFor(id, ctx) : this.def.schema;
    const schemaErr = schema && validate(schema, copy);
    if (schemaErr) return `invalid configuration: ${schemaErr}`;
    return await this.def.check?.(copy, ctx, id, subPath);
  }

  /** Plugin secret fields (and the collection's own secrets) encrypted, as stored and as PUT/POST/PATCH answer. */
  private seal(conf: Conf, ctx: AdminContext): void {
    const k = ctx.keyring;
    if (!k) return;
    ctx.plugins.mapSecrets(conf.plugins, this.def.pluginType ?? 'route', (v) => k.encrypt(v));
    this.def.encrypt?.(conf, k);
  }

  /** The stored value with plugin secrets decrypted, as GET answers and PATCH merges into. */
  private open(value: Conf, ctx: AdminContext): Conf {
    const k = ctx.keyring;
    if (k) {
      ctx.plugins.mapSecrets(value.plugins, this.def.pluginType ?? 'route', (v) => k.decrypt(v));
      this.def.decrypt?.(value, k);
    }
    return value;
  }

  private hide(value: Conf): Conf {
    if (!this.def.hidden) return value;
    for (const f of this.def.hidden) delete value[f];
    return value;
  }

  private async get(call: ResourceCall, ctx: AdminContext): Promise<AdminResponse> {
    if (call.id !== undefined) {
      const key = this.key(ctx, call.id, call.subPath);
      const kv = await ctx.store.get(key);
      if (!kv) return notFound();
      return {
        status: 200, apiVersion: true,
        body: { key, value: this.hide(this.open(JSON.parse(kv.value), ctx)), createdIndex: kv.createRevision, modifiedIndex: kv.modRevision },
      };
    }
    const dir = this.key(ctx, '', call.subPath);
    const { kvs } = await ctx.store.list(dir);
    // `<prefix>/routes/` keys are APISIX's directory placeholders (`apisix init_etcd`), not objects
    const items = kvs.filter((kv) => !kv.key.endsWith('/') && (!this.def.listed || this.def.listed(kv)))
      .map((kv) => ({ key: kv.key, value: this.hide(this.open(JSON.parse(kv.value), ctx)), createdIndex: kv.createRevision, modifiedIndex: kv.modRevision }));
    if (items.length === 0 && this.def.emptyListNotFound) return notFound();
    return listResponse(items, call.args, this.def.filterFields ?? []);
  }

  private async put(call: ResourceCall, ctx: AdminContext): Promise<AdminResponse> {
    const conf = call.body as Conf;
    const checked = await this.checkConf(call.id, conf, !this.def.noId, ctx, false, call.subPath);
    if (checked.error) return badRequest(checked.error);
    const id = checked.id;
    if (id === undefined) return badRequest(`missing ${this.def.kind} id`);
    const key = this.key(ctx, id, call.subPath);
    const early = await this.def.beforePut?.(key, ctx);
    if (early) return early;
    const prev = await ctx.store.get(key);
    const now = ctx.now();
    this.seal(conf, ctx);
    const prevTime = prev ? (JSON.parse(prev.value) as Conf).create_time : undefined;
    if (this.def.idInValue) {
      conf.id = id;
    } else {
      conf.create_time = prevTime ?? now;
      conf.update_time = now;
    }
    const res = await ctx.store.put(key, JSON.stringify(conf), { ttl: ttlOf(call.args) });
    return { status: res.prev ? 200 : 201, body: { key, value: conf }, apiVersion: true };
  }

  private async post(call: ResourceCall, ctx: AdminContext): Promise<AdminResponse> {
    const conf = call.body as Conf;
    const checked = await this.checkConf(call.id, conf, false, ctx);
    if (checked.error) return badRequest(checked.error);
    // APISIX takes the revision of a write to `/gen_id`, zero-padded to 20 digits
    const gen = await ctx.store.put(`${ctx.settings.keyPrefix}/gen_id`, '0');
    const id = String(gen.revision).padStart(20, '0');
    const now = ctx.now();
    const value: Conf = { ...conf, id, create_time: now, update_time: now };
    this.seal(value, ctx);
    const key = this.key(ctx, id, call.subPath);
    await ctx.store.put(key, JSON.stringify(value), { ttl: ttlOf(call.args) });
    return { status: 201, body: { key, value }, apiVersion: true };
  }

  private async remove(call: ResourceCall, ctx: AdminContext): Promise<AdminResponse> {
    if (call.id === undefined) return badRequest(`missing ${this.def.kind} id`);
    const key = this.key(ctx, call.id, call.subPath);
    if (this.def.deleteCheck && call.args.get('force') !== 'true') {
      const err = await this.def.deleteCheck(call.id, ctx);
      if (err) return badRequest(err);
    }
    await this.def.afterDelete?.(key, ctx);
    const res = await ctx.store.delete(key);
    if (res.deleted === 0) return notFound();
    return { status: 200, body: { deleted: '1', key }, apiVersion: true };
  }

  private async patch(call: ResourceCall, ctx: AdminContext): Promise<AdminResponse> {
    if (call.id === undefined) return badRequest(`missing ${this.def.kind} id`);
    const key = this.key(ctx, call.id);
    const patch = call.body;
    if (patch === undefined) return badRequest('missing new configuration');
    if (!call.subPath && !isObject(patch)) return badRequest('invalid configuration');
    const old = await ctx.store.get(key);
    if (!old) return notFound();
    let value: Conf = this.open(JSON.parse(old.value), ctx);
    if (call.subPath) {
      const r = patchSubPath(value, call.subPath, patch);
      if (typeof r === 'string') return badRequest(r);
      value = r;
      value.update_time = ctx.now();
    } else {
      value = mergePatch(value, patch as Conf) as Conf;
      if ((patch as Conf).update_time === undefined) value.update_time = ctx.now();
    }
    const checked = await this.checkConf(call.id, value, true, ctx, true, call.subPath);
    if (checked.error) return badRequest(checked.error);
    this.seal(value, ctx);
    const res = await ctx.store.put(key, JSON.stringify(value), { expectRevision: old.modRevision, ttl: ttlOf(call.args) });
    if (!res.ok) return unavailable('value changed before overwritten');
    return { status: 200, body: { key, value }, apiVersion: true };
  }
}

function ttlOf(args: URLSearchParams): number | undefined {
  const t = args.get('ttl');
  return t === null ? undefined : Number(t);
}

export function defineResource(def: ResourceDef): Resource {
  return new Resource(def);
}
