/**
 * Issue 10, defect 12: oversized request metadata gets a status, from a
 * limit the server sets below the size at which HTTP/2 itself gives up,
 * and an authorization value longer than any token is UNAUTHENTICATED
 * without a lookup. grpc-js clients against the real gRPC port.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { collect, failure, newUser, unary, type AnyClient, useUserClients } from '../helpers/user-client.js';
import { BACKENDS } from '../helpers/postgres.js';

describe.each(BACKENDS)('on %s', (backend) => {
  let c: AnyClient;
  const fixture = useUserClients(backend);

  beforeEach(async () => {
    c = fixture.serve.client();
    await unary(c, 'CreateUser', newUser(1));
  });

  /** The admin token and `entries` more metadata values of `kib` KiB each. */
  function padded(entries: number, kib: number): grpc.Metadata {
    const metadata = fixture.serve.auth();
    for (let i = 0; i < entries; i++) metadata.set(`x-padding-${i}`, 'a'.repeat(kib * 1024));
    return metadata;
  }

  describe('request metadata', () => {
    it('answers 200 KB of metadata with RESOURCE_EXHAUSTED naming the limit, even with a valid token', async () => {
      // Four values of 50 KB: each small enough for HTTP/2's header compression, so the request arrives whole.
      expect(await failure(unary(c, 'GetUser', { user_id: '1' }, padded(4, 50)))).toEqual({
        code: 'RESOURCE_EXHAUSTED',
        details: expect.stringMatching(/^request metadata is \d+ bytes; the limit is 16384$/),
      });
      // The same for a public method, a stream, and the services every server has.
      expect(await failure(unary(c, 'CreateUser', newUser(2), padded(4, 50)))).toMatchObject({ code: 'RESOURCE_EXHAUSTED' });
      expect(await failure(collect(c.ListUsers({}, padded(4, 50))))).toMatchObject({ code: 'RESOURCE_EXHAUSTED' });
      const raw = fixture.serve.raw();
      const health = await failure(
        new Promise((resolve, reject) =>
          raw.makeUnaryRequest(
            '/grpc.health.v1.Health/Check',
            (b: Buffer) => b,
            (b: Buffer) => b,
            Buffer.alloc(0),
            padded(4, 50),
            (e, r) => (e ? reject(e) : resolve(r)),
          ),
        ),
      );
      expect(health).toMatchObject({ code: 'RESOURCE_EXHAUSTED' });
      // Nothing was created, and the connection still serves calls.
      expect((await collect(c.ListUsers({}, fixture.serve.auth()))).map((u) => u.username)).toEqual(['user1']);
    });

    it('serves a request with 15 KiB of metadata', async () => {
      expect((await unary(c, 'GetUser', { user_id: '1' }, padded(1, 15))).username).toBe('user1');
    });

    it('answers an authorization value longer than any token with UNAUTHENTICATED before looking it up', async () => {
      for (const length of [257, 1024, 10_000]) {
        const metadata = new grpc.Metadata();
        metadata.set('authorization', `Bearer mat_${'a'.repeat(length - 11)}`);
        expect(await failure(unary(c, 'GetUser', { user_id: '1' }, metadata))).toEqual({
          code: 'UNAUTHENTICATED',
          details: 'the authorization metadata is longer than any token (at most 256 characters)',
        });
      }
      // A 60 KB one is over the metadata limit and gets that status instead.
      const huge = new grpc.Metadata();
      huge.set('authorization', `Bearer ${'a'.repeat(60 * 1024)}`);
      expect(await failure(unary(c, 'GetUser', { user_id: '1' }, huge))).toMatchObject({ code: 'RESOURCE_EXHAUSTED' });
    });
  });
});
