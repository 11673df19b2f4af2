/**
 * The descriptor set that `npm run build` compiles with buf from every
 * .proto under proto/ (imports included): what reflection serves, and the
 * google.rpc messages of a refused call's details (retry-info.ts). Read
 * once per process, at the first of those.
 */
import { readFileSync } from 'node:fs';
import { createFileRegistry, fromBinary, type FileRegistry } from '@bufbuild/protobuf';
import { FileDescriptorSetSchema, type FileDescriptorSet } from '@bufbuild/protobuf/wkt';
import { DESCRIPTOR_SET } from './protos.js';

const sets = new Map<string, FileDescriptorSet>();
const registries = new Map<string, FileRegistry>();

export function readDescriptorSet(path = DESCRIPTOR_SET): FileDescriptorSet {
  let set = sets.get(path);
  if (!set) {
    let bytes: Buffer;
    try {
      bytes = readFileSync(path);
    } catch (error) {
      throw new Error(`cannot read the compiled protos at ${path} (run \`npm run build\`): ${(error as Error).message}`, { cause: error });
    }
    set = fromBinary(FileDescriptorSetSchema, bytes);
    sets.set(path, set);
  }
  return set;
}

/** Every message, enum and service of the descriptor set, linked. */
export function descriptorRegistry(path = DESCRIPTOR_SET): FileRegistry {
  let registry = registries.get(path);
  if (!registry) {
    registry = createFileRegistry(readDescriptorSet(path));
    registries.set(path, registry);
  }
  return registry;
}
