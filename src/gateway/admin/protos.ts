/** /protos (apisix/admin/proto.lua): the content must compile (text or a base64
 *  descriptor set), and a proto may not be deleted while a route's or service's grpc-transcode names it. */
import { compileProto } from '../grpc/proto-content.ts';
import { protoSchema } from '../schema/resources.ts';
import { defineResource } from './resource.ts';

export const protos = defineResource({
  name: 'protos', kind: 'proto', schema: protoSchema,
  unsupported: ['patch'],
  check(conf) {
    const { error } = compileProto((conf as { content: string }).content);
    return error === undefined ? undefined : `invalid content: ${error}`;
  },
  async deleteCheck(id, ctx) {
    for (const [dir, kind] of [['routes', 'route'], ['services', 'service']]) {
      const { kvs } = await ctx.store.list(`${ctx.settings.keyPrefix}/${dir}/`);
      for (const kv of kvs) {
        if (kv.key.endsWith('/')) continue;
        const v = JSON.parse(kv.value) as { id?: unknown; plugins?: Record<string, { proto_id?: unknown } | undefined> };
        const protoId = v.plugins?.['grpc-transcode']?.proto_id;
        if (protoId !== undefined && String(protoId) === id) return `can not delete this proto, ${kind} [${String(v.id)}] is still using it now`;
      }
    }
    return undefined;
  },
});
