/** /protos (apisix/admin/proto.lua). */
import { protoSchema } from '../schema/resources.ts';
import { defineResource } from './resource.ts';

export const protos = defineResource({
  name: 'protos', kind: 'proto', schema: protoSchema,
  unsupported: ['patch'],
});
