/**
 * The reflection services serve registers before their protocol's messages
 * are loaded (src/grpc/reflection.ts): the same paths, kinds and names as
 * @grpc/reflection's own definitions, and (de)serializers that encode and
 * decode as the library's do once called.
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
  it("have the library's paths, kinds and names, and encode and decode as its own", () => {
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
      const request = { host: 'h', listServices: '*' };
      const bytes = theirs.requestSerialize(request);
      expect(bytes.length).toBeGreaterThan(3);
      expect(mine.requestSerialize(request)).toEqual(bytes);
      expect(mine.requestDeserialize(bytes)).toEqual(theirs.requestDeserialize(bytes));
      const answer = { validHost: 'h', listServicesResponse: { service: [{ name: 'user.v1.UserService' }] } };
      const answerBytes = theirs.responseSerialize(answer);
      expect(answerBytes.length).toBeGreaterThan(0);
      expect(mine.responseSerialize(answer)).toEqual(answerBytes);
      expect(mine.responseDeserialize(answerBytes)).toEqual(theirs.responseDeserialize(answerBytes));
    }
  });
});
