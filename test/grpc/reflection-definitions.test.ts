/**
 * The reflection services serve registers before @grpc/reflection is loaded
 * (src/grpc/reflection.ts): the same paths, kinds and names as the
 * library's own definitions, carrying the messages' bytes as they are (the
 * library's codec reads and writes them in the handler, once loaded: the
 * reflection tests drive that through real clients).
 */
import { describe, expect, it } from 'vitest';
import type * as grpc from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import { addReflection } from '../../src/grpc/reflection.js';

/** What a server is given by `add`, by the path of each method. */
function added(add: (server: grpc.Server) => void): Map<string, grpc.MethodDefinition<unknown, unknown>> {
  const methods = new Map<string, grpc.MethodDefinition<unknown, unknown>>();
  const server = {
    addService: (definition: grpc.ServiceDefinition) => {
      for (const method of Object.values(definition)) methods.set(method.path, method);
    },
  };
  add(server as unknown as grpc.Server);
  return methods;
}

describe('reflection services registered before their messages are loaded', () => {
  it("have the library's paths, kinds and names, and carry the bytes as they are", () => {
    const ours = added((server) => addReflection(server, ['user.v1.UserService']));
    const library = added((server) => new ReflectionService({}, { services: [] }).addToServer(server));
    expect([...ours.keys()].sort()).toEqual([...library.keys()].sort());
    for (const [path, theirs] of library) {
      const mine = ours.get(path)!;
      expect({ path: mine.path, requestStream: mine.requestStream, responseStream: mine.responseStream, originalName: mine.originalName }).toEqual({
        path: theirs.path,
        requestStream: theirs.requestStream,
        responseStream: theirs.responseStream,
        originalName: theirs.originalName,
      });
      const bytes = theirs.requestSerialize({ host: 'h', listServices: '*' });
      expect(bytes.length).toBeGreaterThan(3);
      for (const codec of [mine.requestSerialize, mine.requestDeserialize, mine.responseSerialize, mine.responseDeserialize]) {
        expect(codec(bytes)).toBe(bytes);
      }
    }
  });
});
