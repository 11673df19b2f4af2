#!/usr/bin/env node
/**
 * Writes proto/loader.json: every .proto under proto/ that declares a
 * service, and what it imports, parsed by protobufjs as @grpc/proto-loader
 * parses them (keepCase, the include path proto/, protobufjs's own copies of
 * google/protobuf/*), in protobufjs's JSON form.
 *
 * src/grpc/protos.ts builds the services' grpc-js definitions from it with
 * protobufjs/light: no .proto text is read or parsed at run time, and none
 * of the descriptors proto-loader makes for every message (which serve
 * never reads: reflection serves the descriptor set) is built. Parsing and
 * those descriptors were most of what loading the services cost serve's
 * start.
 */
import { accessSync, constants, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

const PROTO_ROOT = fileURLToPath(new URL('../proto', import.meta.url));
const OUT = join(PROTO_ROOT, 'loader.json');

const files = readdirSync(PROTO_ROOT, { recursive: true })
  .filter((path) => path.endsWith('.proto'))
  .filter((path) => /^service\s/m.test(readFileSync(join(PROTO_ROOT, path), 'utf8')))
  .sort();
if (!files.includes(join('user', 'v1', 'user.proto'))) throw new Error(`no user/v1/user.proto under ${PROTO_ROOT}`);

const root = new protobuf.Root();
// proto-loader's include path resolution (its util.js): a name found under proto/ is read from there.
const resolvePath = root.resolvePath;
root.resolvePath = (origin, target) => {
  if (isAbsolute(target)) return target;
  const full = join(PROTO_ROOT, target);
  try {
    accessSync(full, constants.R_OK);
    return full;
  } catch {
    return resolvePath(origin, target);
  }
};
root.loadSync(files, { keepCase: true });
root.resolveAll();
writeFileSync(OUT, `${JSON.stringify(root.toJSON())}\n`);
