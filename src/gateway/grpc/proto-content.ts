/**
 * A proto's `content` compiled as APISIX's grpc-transcode/proto.lua compiles
 * it: as .proto text first, else as a base64 FileDescriptorSet (`protoc
 * --descriptor_set_out`); when neither compiles, the text's error is the
 * answer. protobufjs does the parsing (docs/dependencies.md).
 */
import protobuf from 'protobufjs';
// adds Root.fromDescriptor
import 'protobufjs/ext/descriptor.js';

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/;

export interface CompiledProto { root?: protobuf.Root; error?: string }

export function compileProto(content: string): CompiledProto {
  try {
    const root = protobuf.parse(content, { keepCase: true }).root;
    root.resolveAll();
    return { root };
  } catch (textError) {
    const root = fromDescriptorSet(content);
    return root ? { root } : { error: (textError as Error).message };
  }
}

function fromDescriptorSet(content: string): protobuf.Root | undefined {
  if (!content || !BASE64.test(content)) return undefined;
  try {
    const root = protobuf.Root.fromDescriptor(Buffer.from(content, 'base64'));
    root.resolveAll();
    return root;
  } catch {
    return undefined;
  }
}
