#!/usr/bin/env node
/**
 * Writes proto/wire-schema.json: the fields of every message the services
 * of serve exchange (and of the messages inside them), every enum among
 * them, and each method's path, message types and streaming, read from the
 * descriptor set that buf compiles (proto/descriptor-set.binpb, so this
 * runs after `npm run build:proto`).
 *
 * It is what the one-shot client commands encode and decode with
 * (src/grpc/proto-wire.ts) instead of grpc-js and proto-loader, which cost
 * several times Node's own start-up to load and to parse the .proto files;
 * @bufbuild/protobuf reads the descriptors here, at build time, and the
 * command reads a few kilobytes of JSON.
 *
 * A field is { no, name } and one of t (a scalar type, by its number in
 * descriptor.proto: 1 double ... 18 sint64), e (an enum) or m (a message),
 * with list: 1 for a repeated field, map: K (the key's scalar type) for a
 * map, whose value t/e/m describes, and oneof: NAME for a member of a oneof
 * (`_<field>` for a proto3 `optional` field, as the loader names it).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createFileRegistry, fromBinary } from '@bufbuild/protobuf';
import { FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const SET = join(ROOT, 'proto', 'descriptor-set.binpb');
const OUT = join(ROOT, 'proto', 'wire-schema.json');

const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(SET)));
const messages = {};
const enums = {};
const methods = {};

function addEnum(desc) {
  if (enums[desc.typeName]) return;
  enums[desc.typeName] = Object.fromEntries(desc.values.map((value) => [value.number, value.name]));
}

/** The value part of a field: a scalar type, an enum or a message (added with what it holds). */
function valueSpec(kind, field) {
  if (kind === 'scalar') return { t: field.scalar };
  if (kind === 'enum') {
    addEnum(field.enum);
    return { e: field.enum.typeName };
  }
  addMessage(field.message);
  return { m: field.message.typeName };
}

function addMessage(desc) {
  if (messages[desc.typeName]) return;
  const fields = [];
  messages[desc.typeName] = fields;
  for (const field of desc.fields) {
    const entry = { no: field.number, name: field.name };
    if (field.fieldKind === 'list') Object.assign(entry, { list: 1 }, valueSpec(field.listKind, field));
    else if (field.fieldKind === 'map') Object.assign(entry, { map: field.mapKey }, valueSpec(field.mapKind, field));
    else Object.assign(entry, valueSpec(field.fieldKind, field));
    if (field.oneof) entry.oneof = field.oneof.name;
    // A proto3 `optional` field: the loader (protobufjs) sees it in a oneof of its own named `_<field>`.
    else if (field.proto.proto3Optional) entry.oneof = `_${field.name}`;
    fields.push(entry);
  }
}

for (const desc of registry) {
  if (desc.kind !== 'service') continue;
  for (const method of desc.methods) {
    addMessage(method.input);
    addMessage(method.output);
    methods[`/${desc.typeName}/${method.name}`] = [method.input.typeName, method.output.typeName, method.methodKind];
  }
}
if (!methods['/user.v1.UserService/GetUser']) throw new Error(`${SET} holds no user.v1.UserService: run \`npm run build:proto\` first`);
writeFileSync(OUT, `${JSON.stringify({ messages, enums, methods })}\n`);
