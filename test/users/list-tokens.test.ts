/**
 * Issue 22: ListUsers pages by token (AIP-158) beside its numbered pages,
 * counts without a count(*) of the table, and finds a filter's users
 * through the search index or by walking the ids, with the same answer
 * either way. Through the real gRPC port with grpc-js clients, on both
 * backends.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import type * as grpc from '@grpc/grpc-js';
import { collect, failure, newUser, unary, type AnyClient, useUserClients } from '../helpers/user-client.js';
import { BACKENDS } from '../helpers/postgres.js';

interface Page {
  ids: number[];
  names: string[];
  total: number;
  size: number;
  /** x-next-page-token; undefined when the server sent none. */
  next: string | undefined;
}

describe.each(BACKENDS)('ListUsers on %s', (backend) => {
  const fixture = useUserClients(backend);
  let c: AnyClient;

  beforeEach(() => {
    c = fixture.serve.client();
  });

  async function list(request: Record<string, unknown>): Promise<Page> {
    const call = c.ListUsers(request, fixture.serve.auth());
    let headers: grpc.Metadata | undefined;
    call.once('metadata', (metadata: grpc.Metadata) => (headers = metadata));
    const users = await collect(call);
    const header = (key: string) => (headers!.get(key)[0] as string | undefined) ?? undefined;
    return {
      ids: users.map((u) => Number(u.id)),
      names: users.map((u) => u.username),
      total: Number(header('x-total-count')),
      size: Number(header('x-page-size')),
      next: header('x-next-page-token'),
    };
  }

  /** Every page of a walk by tokens, `between` run after each page but the last. */
  async function walk(request: Record<string, unknown>, between: (page: Page) => Promise<void> = async () => undefined): Promise<Page[]> {
    const pages: Page[] = [];
    for (let token = ''; ; ) {
      const page = await list({ ...request, page_token: token });
      pages.push(page);
      if (!page.next) return pages;
      expect(pages.length, 'pages').toBeLessThan(100);
      await between(page);
      token = page.next;
    }
  }

  async function createUsers(count: number, extra: (n: number) => Record<string, unknown> = () => ({})): Promise<void> {
    for (let n = 1; n <= count; n++) await unary(c, 'CreateUser', newUser(String(n).padStart(2, '0'), extra(n)));
  }

  const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

  it('walks every user once by page tokens, in id order, with the total on every page and no token on the last', async () => {
    await createUsers(25);
    const pages = await walk({ page_size: 7 });
    expect(pages.map((p) => p.ids)).toEqual([range(1, 7), range(8, 14), range(15, 21), range(22, 25)]);
    expect(pages.map((p) => [p.total, p.size])).toEqual(Array(4).fill([25, 7]));
    expect(pages.map((p) => p.next === undefined)).toEqual([false, false, false, true]);
    // AIP-158: page_size may change from page to page.
    const first = await list({ page_size: 10 });
    const rest = await list({ page_size: 100, page_token: first.next });
    expect([first.ids, rest.ids, rest.next]).toEqual([range(1, 10), range(11, 25), undefined]);
    // A page that ends exactly at the last user has no next page.
    expect((await list({ page_size: 25 })).next).toBeUndefined();
    // page_size 0 after a token: every user after that page, and no token.
    expect(await list({ page_size: 0, page_token: first.next })).toMatchObject({ ids: range(11, 25), size: 0, next: undefined });
    // Page 1 (or 0) beside a token is the token's page.
    expect((await list({ page: 1, page_size: 10, page_token: first.next })).ids).toEqual(range(11, 20));
  });

  it('shows no user twice and skips none that was there throughout, while users are created and deleted between pages', async () => {
    await createUsers(30);
    const deleted = new Set<number>();
    const deletedUnseen = new Set<number>();
    const shown = new Set<number>();
    const created = new Map<number, string>();
    const pages = await walk({ page_size: 6 }, async (page) => {
      for (const id of page.ids) shown.add(id);
      // The last user shown (the token's own), one behind and one ahead go; two new ones come.
      for (const id of [page.ids.at(-1)!, page.ids[0]!, page.ids.at(-1)! + 3]) {
        if (deleted.has(id)) continue;
        await unary(c, 'DeleteUser', { user_id: String(id) }, fixture.serve.auth());
        deleted.add(id);
        if (!shown.has(id)) deletedUnseen.add(id);
      }
      for (let i = 0; i < 2; i++) {
        const { user } = await unary(c, 'CreateUser', newUser(`new${created.size + 1}`));
        created.set(Number(user.id), user.username);
      }
    });
    const seen = pages.flatMap((p) => p.ids);
    expect(new Set(seen).size, 'a user shown twice').toBe(seen.length);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    for (const id of range(1, 30)) if (!deleted.has(id)) expect(seen, `user ${id} skipped`).toContain(id);
    // Users deleted before their page never show; those created while the walk went on come at its end.
    expect(deletedUnseen.size).toBeGreaterThan(0);
    for (const id of deletedUnseen) expect(seen).not.toContain(id);
    expect(seen.filter((id) => created.has(id))).toEqual([...created.keys()].filter((id) => !deletedUnseen.has(id)));
    expect(pages.at(-1)!.total).toBe(30 + created.size - deleted.size);
  });

  it('pages a filter the same through the search index and by walking the ids, counts it, and finds filters of 1 and 2 characters', async () => {
    // 40 users; every 4th a zebra (10 of them), one Élodie, one with quotes, one with a percent sign.
    const names: Record<number, string> = { 6: 'Élodie Dupont', 7: 'Quote "Q" Person', 9: '100% Sure' };
    await createUsers(40, (n) => ({ full_name: names[n] ?? (n % 4 === 0 ? `Zebra member ${n}` : `Member ${n}`) }));
    const zebras = range(1, 10).map((i) => 4 * i);
    // The index serves a page when 2 x matches^2 < rows read x users: a page of 3 (4 rows read) walks the ids, pages of 10
    // and 20 take the matches from the index. The same users either way.
    for (const size of [3, 10, 20]) {
      const pages = await walk({ page_size: size, filter: 'ZEBRA' });
      expect(
        pages.flatMap((p) => p.ids),
        `page_size ${size}`,
      ).toEqual(zebras);
      expect(pages.every((p) => p.total === 10)).toBe(true);
    }
    // Numbered pages of a filter, both ways (5 rows read walk, 13 take the index).
    expect((await list({ page: 2, page_size: 2, filter: 'zebra' })).ids).toEqual([12, 16]);
    expect((await list({ page: 2, page_size: 6, filter: 'zebra' })).ids).toEqual([28, 32, 36, 40]);
    // Shorter than a trigram: no index can serve them, and they still work.
    expect(await list({ filter: 'z' })).toMatchObject({ ids: zebras, total: 10 });
    expect(await list({ filter: 'Ze', page_size: 4 })).toMatchObject({ ids: zebras.slice(0, 4), total: 10 });
    expect((await list({ filter: 'ze', page_size: 4, page_token: (await list({ filter: 'ze', page_size: 4 })).next })).ids).toEqual(zebras.slice(4, 8));
    // Quotes, wildcards and case, exactly as the filter's own LIKE takes them.
    expect(await list({ filter: '"q" p' })).toMatchObject({ ids: [7], total: 1 });
    expect(await list({ filter: '0% s' })).toMatchObject({ ids: [9], total: 1 });
    expect(await list({ filter: '%' })).toMatchObject({ ids: [9], total: 1 });
    expect(await list({ filter: 'Élodie' })).toMatchObject({ ids: [6], total: 1 });
    expect(await list({ filter: 'nobody' })).toMatchObject({ ids: [], total: 0, next: undefined });
    const folded = await list({ filter: 'élodie' });
    // SQLite's LIKE folds ASCII letters only, though its trigram index folds every letter: the LIKE decides.
    if (backend === 'sqlite') expect(folded).toMatchObject({ ids: [], total: 0 });
    else expect(folded.ids.length).toBe(folded.total);
  });

  it('goes on from a numbered page by its token, and refuses page 2 beside a token', async () => {
    await createUsers(25);
    const second = await list({ page: 2, page_size: 10 });
    expect(second.ids).toEqual(range(11, 20));
    expect((await list({ page_size: 10, page_token: second.next })).ids).toEqual(range(21, 25));
    expect(await failure(collect(c.ListUsers({ page: 2, page_size: 10, page_token: second.next }, fixture.serve.auth())))).toEqual({
      code: 'INVALID_ARGUMENT',
      details: 'page and page_token both say where the page starts: send page_token alone (page 0), or page without page_token',
    });
  });

  it('refuses a token of another filter, a damaged or hand-made one and one past its bound, saying to start again', async () => {
    await createUsers(5, (n) => ({ full_name: n % 2 ? 'Zebra' : 'Member' }));
    const zebra = (await list({ filter: 'zebra', page_size: 1 })).next!;
    expect(zebra).toMatch(/^[\w-]{28}$/);
    const refusal = (request: Record<string, unknown>) => failure(collect(c.ListUsers(request, fixture.serve.auth())));
    expect(await refusal({ page_size: 1, page_token: zebra })).toEqual({
      code: 'INVALID_ARGUMENT',
      details: 'page_token belongs to a list with another filter: send the filter of the page it came with, or start again without page_token',
    });
    // Padding the filter does not change it: the filter applied is trimmed.
    expect((await list({ filter: ' zebra ', page_size: 1, page_token: zebra })).ids).toEqual([3]);
    const flipped = `${zebra.slice(0, 10)}${zebra[10] === 'A' ? 'B' : 'A'}${zebra.slice(11)}`;
    for (const token of ['not-a-token', zebra.slice(0, 27), `${zebra}AAAA`, flipped, `${zebra.slice(0, 27)}=`, Buffer.alloc(21).toString('base64url')]) {
      expect(await refusal({ filter: 'zebra', page_size: 1, page_token: token }), token).toEqual({
        code: 'INVALID_ARGUMENT',
        details:
          'page_token is not a token of this list (damaged, cut short or made by hand): pass the next page token exactly as it came, or start again without page_token',
      });
    }
    expect(await refusal({ page_token: 'A'.repeat(129) })).toEqual({
      code: 'INVALID_ARGUMENT',
      details: 'page_token must be at most 128 characters; it is 129',
    });
    expect(await refusal({ page_token: 'a\u0000' })).toEqual({ code: 'INVALID_ARGUMENT', details: 'page_token must not contain NUL (U+0000)' });
  });

  it('counts every user without counting the table, whoever writes them', async () => {
    await createUsers(3);
    const bulk = await new Promise<any>((resolve, reject) => {
      const call = c.BulkCreateUsers(fixture.serve.auth(), (error: grpc.ServiceError | null, response: unknown) => (error ? reject(error) : resolve(response)));
      for (const n of [4, 5, 6, 1]) call.write(newUser(String(n).padStart(2, '0')));
      call.end();
    });
    expect(bulk.created_count).toBe(3);
    await unary(c, 'DeleteUser', { user_id: '2' }, fixture.serve.auth());
    const blog = await fetch(`${fixture.serve.running.url}/api/users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'blogger', email: 'blogger@example.com', password: 'correct horse' }),
    });
    expect(blog.status).toBe(201);
    const all = await list({ page_size: 0 });
    expect(all.names).toEqual(['user01', 'user03', 'user04', 'user05', 'user06', 'blogger']);
    expect(all.total).toBe(6);
    expect((await list({ page_size: 2 })).total).toBe(6);
  });
});
