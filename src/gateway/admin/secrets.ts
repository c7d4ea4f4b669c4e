/** /secrets/{manager}/{id} (apisix/admin/secrets.lua): the schema is the manager's; the id is `manager/id`. */
import { secretSchemas } from '../schema/resources.ts';
import { defineResource } from './resource.ts';

export const secrets = defineResource({
  name: 'secrets', kind: 'secret', schema: { type: 'object' },
  unsupported: ['post'],
  schemaFor: (id) => secretSchemas[String(id).split('/')[0]] ?? { type: 'object', not: {} },
});
