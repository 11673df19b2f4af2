/** Reading files of sync requests without commander: each line's request or problem, with its line. */
import { describe, expect, it } from 'vitest';
import { countSyncRequests, readSyncFile, type SyncItem } from '../../src/users/sync-file.js';

async function* chunks(text: string): AsyncGenerator<Buffer> {
  yield Buffer.from(text);
}

async function items(text: string): Promise<SyncItem[]> {
  const out: SyncItem[] = [];
  for await (const item of readSyncFile(chunks(text))) out.push(item);
  return out;
}

describe('readSyncFile', () => {
  it('reads upserts and deletes with their lines; an upsert replaces the whole user', async () => {
    const text = [
      JSON.stringify({ ref: 'c1', upsert: { username: 'ann', email: 'ann@example.com', password: 'correct-horse', roles: ['editor'] } }),
      '',
      JSON.stringify({ ref: 'u1', upsert: { id: '7', username: 'ben', email: 'ben@example.com', is_active: false } }),
      JSON.stringify({ ref: 9, delete: 9 }),
    ].join('\n');
    expect(await items(text)).toEqual([
      {
        line: 1,
        op: 'create',
        request: {
          client_ref: 'c1',
          upsert: {
            user: { id: '0', username: 'ann', email: 'ann@example.com', full_name: '', is_active: true, roles: ['editor'] },
            password: 'correct-horse',
          },
        },
      },
      {
        line: 3,
        op: 'update',
        request: {
          client_ref: 'u1',
          upsert: { user: { id: '7', username: 'ben', email: 'ben@example.com', full_name: '', is_active: false, roles: [] }, password: '' },
        },
      },
      { line: 4, op: 'delete', request: { client_ref: '9', delete_user_id: '9' } },
    ]);
  });

  it('turns lines that are no request into problems, with the ref when there is one, else the line', async () => {
    const text = ['not json', '{"ref":"a","upsert":{"username":5}}', '{"ref":"b","delete":1,"upsert":{}}', '{"delete":-1}', '{"ref":"c","extra":1}'].join('\n');
    expect(await items(text)).toEqual([
      { line: 1, ref: 'line 1', problem: 'not valid JSON' },
      { line: 2, ref: 'a', problem: 'upsert.username must be a string' },
      { line: 3, ref: 'b', problem: 'each line needs exactly one of "upsert" and "delete"' },
      { line: 4, ref: 'line 4', problem: 'delete must be a positive user id' },
      { line: 5, ref: 'c', problem: 'unknown field "extra"; expected ref and one of upsert, delete' },
    ]);
  });

  it('counts the non-blank lines as requests', async () => {
    expect(await countSyncRequests(chunks('{"delete":1}\n\n  \nbad\n{"delete":2}'))).toBe(3);
  });
});
