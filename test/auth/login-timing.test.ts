/**
 * A login must not tell whether an account exists by how long it takes:
 * an unknown login is checked against a decoy hash, and that decoy must
 * cost what the accounts' own hashes cost (serve's --password-hash-cost).
 * The scrypt work of each login is recorded here (each derivation's cost,
 * as src/auth/passwords.ts publishes it), not timed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { scryptChannel } from '../../src/auth/passwords.js';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';

const costs: number[] = [];
const record = (message: unknown) => void costs.push((message as { cost: number }).cost);
beforeAll(() => void scryptChannel.subscribe(record));
afterAll(() => void scryptChannel.unsubscribe(record));

describe.each([4, 11])('logins at --password-hash-cost %i', (cost) => {
  let running: RunningServe;
  beforeAll(async () => {
    running = await startTestServe({ hashCost: cost });
    const created = await request(`${running.url}/api/users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'alice', email: 'alice@example.com', password: 'alice-password-1' }),
    });
    expect(created.statusCode, await created.body.text()).toBe(201);
  });
  afterAll(async () => running?.close());

  /** The scrypt costs (log2 N) run while answering one login, and its status. */
  async function login(email: string, password: string): Promise<{ status: number; costs: number[] }> {
    costs.length = 0;
    const response = await request(`${running.url}/api/v2/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password }),
    });
    await response.body.dump();
    return { status: response.statusCode, costs: costs.splice(0) };
  }

  it('costs an unknown account the same scrypt work as a wrong password for a known one', async () => {
    const unknown = await login('nobody@example.com', 'alice-password-1');
    const wrong = await login('alice@example.com', 'not-her-password');
    const right = await login('alice@example.com', 'alice-password-1');
    expect([unknown.status, wrong.status, right.status]).toEqual([401, 401, 200]);
    // The decoy is made at the first login of either kind; each login after it verifies exactly one hash.
    expect(wrong.costs).toEqual([cost]);
    expect(right.costs).toEqual([cost]);
    expect(unknown.costs.at(-1)).toBe(cost);
    expect((await login('nobody@example.com', 'again')).costs).toEqual([cost]);
  });
});
