/**
 * grpc-transcode (apisix/plugins/grpc-transcode.lua): schema only. The
 * Admin API checks and stores its confs (and keeps a proto it names from
 * being deleted, admin/protos.ts); the data plane does not transcode, and
 * refuses a request that would run it (not-implemented.ts).
 */
import type { GatewayPlugin } from './registry.ts';
import { idSchema } from '../schema/resources.ts';
import { notImplemented } from './not-implemented.ts';

export const grpcTranscode: GatewayPlugin = {
  name: 'grpc-transcode', version: 0.1, priority: 506,
  schema: {
    type: 'object',
    properties: {
      max_resp_body_size: {
        type: 'integer', minimum: 1, default: 67108864,
        description: 'maximum response body size in bytes buffered into memory for transcoding; larger responses are truncated',
      },
      proto_id: idSchema,
      service: { description: 'the grpc service name', type: 'string' },
      method: { description: 'the method name in the grpc service.', type: 'string' },
      deadline: { description: 'deadline for grpc, millisecond', type: 'number', default: 0 },
      pb_option: {
        type: 'array',
        items: {
          type: 'string',
          anyOf: [
            { description: 'enum as result', type: 'string', enum: ['enum_as_name', 'enum_as_value'] },
            { description: 'int64 as result', type: 'string', enum: ['int64_as_number', 'int64_as_string', 'int64_as_hexstring'] },
            { description: 'default values option', type: 'string', enum: ['auto_default_values', 'no_default_values', 'use_default_values', 'use_default_metatable'] },
            { description: 'hooks option', type: 'string', enum: ['enable_hooks', 'disable_hooks'] },
          ],
        },
        minItems: 1,
        default: ['enum_as_name', 'int64_as_number', 'auto_default_values', 'disable_hooks'],
      },
      show_status_in_body: { description: 'show decoded grpc-status-details-bin in response body', type: 'boolean', default: false },
      status_detail_type: {
        description: "the message type of the grpc-status-details-bin's details part, if not given, the details part will not be decoded",
        type: 'string',
      },
    },
    additionalProperties: true,
    required: ['proto_id', 'service', 'method'],
  },
  ...notImplemented('grpc-transcode'),
};
