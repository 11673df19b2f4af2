/**
 * The post lists are answered from a cache while the posts are unchanged;
 * a write through the API, or by another connection to the database file,
 * shows at once. (Writes through another instance on a shared PostgreSQL:
 * instances.test.ts.)
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { openDatabase } from '../../src/store/database.js';
import { PostStore } from '../../src/blog/posts.js';
import { SqliteSql } from '../../src/store/sql.js';
import { ListCache } from '../../src/blog/list-cache.js';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { BACKENDS } from '../helpers/postgres.js';

let running: RunningServe;

async function titles(path: string): Promise<string[]> {
  const res = await request(`${running.url}${path}`);
  const body = (await res.body.json()) as { results?: { title: string }[] } | { title: string }[];
  return (Array.isArray(body) ? body : body.results!).map((p) => p.title);
}

async function create(title: string) {
  const res = await request(`${running.url}/api/v2/blog/posts`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${running.adminToken}` },
    body: JSON.stringify({ title, content: 'body' }),
  });
  expect(res.statusCode).toBe(201);
  return (await res.body.json()) as { id: number };
}

describe.each(BACKENDS)('post list cache on %s', (backend) => {
  beforeEach(async () => {
    running = await startTestServe({}, backend);
  });
  afterEach(async () => running.close());

  it('shows writes through the API at once', async () => {
    await create('first');
    expect(await titles('/api/v2/blog/posts')).toEqual(['first']);
    expect(await titles('/api/v1/blog/posts')).toEqual(['first']);
    const second = await create('second');
    expect(await titles('/api/v2/blog/posts')).toEqual(['second', 'first']);
    expect(await titles('/api/v1/blog/posts')).toEqual(['second', 'first']);
    await request(`${running.url}/api/v2/blog/posts/${second.id}`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${running.adminToken}` },
      body: JSON.stringify({ title: 'second, renamed' }),
    }).then((r) => r.body.dump());
    expect(await titles('/api/v2/blog/posts')).toEqual(['second, renamed', 'first']);
  });
});

describe('post list cache on a SQLite file', () => {
  let dataDir: string;
  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'miniapp-listcache-'));
    running = await startTestServe({ store: { kind: 'sqlite', dataDir } }, 'sqlite');
  });
  afterEach(async () => {
    await running.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('shows writes by another connection to the database file', async () => {
    await create('through the API');
    expect(await titles('/api/v2/blog/posts')).toEqual(['through the API']);
    const other = openDatabase({ dataDir });
    try {
      await new PostStore(new SqliteSql(other), () => new Date(Date.now() + 1000)).create({
        title: 'from elsewhere',
        content: 'x',
        tags: [],
        authorId: null,
        author: 'ops',
      });
    } finally {
      other.close();
    }
    expect(await titles('/api/v2/blog/posts')).toEqual(['from elsewhere', 'through the API']);
  });
});

describe('ListCache', () => {
  it('answers only for the same version, and forgets the least recently used', () => {
    const cache = new ListCache(2);
    cache.set('a', 'v1', 'A');
    cache.set('b', 'v1', 'B');
    expect(cache.get('a', 'v1')).toBe('A');
    cache.set('c', 'v1', 'C');
    expect(cache.get('b', 'v1')).toBeUndefined();
    expect(cache.get('a', 'v2')).toBeUndefined();
    expect(cache.get('a', 'v1')).toBeUndefined();
    expect(cache.get('c', 'v1')).toBe('C');
  });

  it('with admitOnSecondRequest, keeps an answer only for a key already asked for under the same version', () => {
    const cache = new ListCache(2, { admitOnSecondRequest: true });
    cache.set('a', 'v1', 'A');
    expect(cache.get('a', 'v1')).toBeUndefined();
    cache.set('a', 'v1', 'A');
    expect(cache.get('a', 'v1')).toBe('A');
    cache.set('b', 'v1', 'B');
    cache.set('b', 'v2', 'B2'); // asked before, but under another version
    expect(cache.get('b', 'v2')).toBeUndefined();
    cache.set('b', 'v2', 'B2');
    expect(cache.get('b', 'v2')).toBe('B2');
    expect(cache.get('a', 'v2')).toBeUndefined();
  });

  it('makes an answer given as a function only when it keeps it', () => {
    const cache = new ListCache<Buffer>(2, { admitOnSecondRequest: true });
    let made = 0;
    const answer = () => {
      made++;
      return Buffer.from('A');
    };
    cache.set('a', 'v1', answer);
    expect(made).toBe(0);
    cache.set('a', 'v1', answer);
    expect(made).toBe(1);
    expect(cache.get('a', 'v1')).toEqual(Buffer.from('A'));
  });
});
