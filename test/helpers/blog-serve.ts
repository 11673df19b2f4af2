/**
 * The blog API on either backend, for the suites of the blog family: one
 * suite, two stores.
 *
 * SQLite: `serve` itself (startTestServe, memory store unless told).
 * PostgreSQL: serve refuses PostgreSQL until every family is on the query
 * interface. Until then this builds the HTTP app serve builds (buildServer:
 * error bodies, CORS, the relay, the three blog mounts, /uploads) with the
 * blog family (posts, list caches, images) and the unlink callbacks on
 * PostgreSQL, and only the users family (users, tokens) on an in-memory
 * SQLite of its own, so every instance has its own admin token. Once serve
 * takes PostgreSQL, the PostgreSQL branch becomes
 * `startTestServe(overrides, 'postgres')` and the rest of this file goes.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { buildServer } from '../../src/server/app.js';
import type { ServeOptions } from '../../src/server/serve.js';
import { openStore, type StoreLocation } from '../../src/store/store.js';
import { openDatabase } from '../../src/store/database.js';
import { UnlinkEventStore } from '../../src/store/unlink-events.js';
import { PostStore } from '../../src/blog/posts.js';
import { openImageStore } from '../../src/blog/uploads.js';
import { UserStore } from '../../src/users/user-store.js';
import { TokenService } from '../../src/auth/tokens.js';
import { UserServiceImpl } from '../../src/users/service.js';
import { PartnerClient } from '../../src/login/partner-client.js';
import { parseAad, parseKey } from '../../src/login/key-material.js';
import { createTestDatabase, type Backend } from './postgres.js';
import { startTestServe } from './serve.js';

export interface BlogServe {
  app: FastifyInstance;
  url: string;
  adminToken: string;
  close(): Promise<void>;
}

type Overrides = Partial<Pick<ServeOptions, 'store' | 'publicUrl' | 'corsOrigin' | 'docs' | 'now'>>;

export async function startBlogServe(backend: Backend, overrides: Overrides = {}): Promise<BlogServe> {
  if (backend === 'sqlite') return startTestServe(overrides);
  const database = overrides.store ? undefined : await createTestDatabase();
  const location: StoreLocation = overrides.store ?? { kind: 'postgres', url: database!.url, poolSize: 5 };
  const now = overrides.now ?? (() => new Date());
  const cleanups: (() => Promise<unknown> | unknown)[] = [];
  const close = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  };
  if (database) cleanups.push(() => database.drop());
  try {
    const store = await openStore(location);
    cleanups.push(() => store.close());
    // The authors are users of the SQLite stand-in, which PostgreSQL's posts cannot reference yet.
    await store.sql.exec('ALTER TABLE posts DROP CONSTRAINT IF EXISTS posts_author_id_fkey');
    const usersDb = openDatabase('memory');
    cleanups.push(() => usersDb.close());
    const userStore = new UserStore(usersDb, now);
    const tokens = new TokenService(usersDb, userStore, now);
    const adminToken = tokens.ensureAdminToken(undefined);
    const users = new UserServiceImpl({ users: userStore, tokens, hashCost: 10, now });
    const images = openImageStore(store, now);
    cleanups.push(() => images.close());
    // Never called by the blog's tests: no partner API stands behind it.
    const client = new PartnerClient({ baseUrl: 'http://127.0.0.1:9' });
    cleanups.push(() => client.close());
    const app = await buildServer({
      logger: false,
      corsOrigin: overrides.corsOrigin,
      relay: {
        client,
        key: parseKey(randomBytes(32).toString('hex')),
        aad: parseAad('00'),
        aadText: '00',
        events: new UnlinkEventStore(store.sql),
        version: 'test',
        now,
      },
      blog: {
        posts: new PostStore(store.sql, now),
        users,
        tokens,
        images,
        docs: overrides.docs ?? true,
        publicUrl: overrides.publicUrl,
        onPublished: () => undefined,
      },
    });
    cleanups.push(() => app.close());
    await app.listen({ host: '127.0.0.1', port: 0 });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    return { app, url: `http://127.0.0.1:${port}`, adminToken, close };
  } catch (error) {
    await close();
    throw error;
  }
}
