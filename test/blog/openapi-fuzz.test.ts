/**
 * Issue 10's acceptance test: each blog mount is fuzzed from the OpenAPI
 * document it serves (test/helpers/openapi-fuzz.ts). Every operation in
 * the document gets requests valid by it and requests broken in one way,
 * each sent with no token, a valid token and a bad Authorization header,
 * then its edge values with a valid token. Every answer must be below 500,
 * have a documented status, match that status's documented schema, carry
 * `{ error, detail, code }` when it is an error, and show no stack trace;
 * every operation must succeed at least once. All violations are collected,
 * each with a curl command that reproduces it, and reported together.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { BLOG_MOUNTS } from '../../src/server/app.js';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { BACKENDS } from '../helpers/postgres.js';
import { fuzz, operationsOf, type Operation } from '../helpers/openapi-fuzz.js';

/** Fixed, so a failure shows the same requests on every run; change it to explore. */
const SEED = 20261123;
/** Generated requests per operation, each sent three times (no token, valid token, bad header). */
const RUNS_PER_OPERATION = 30;

const USER = { username: 'fuzzer', email: 'fuzzer@example.com', password: 'fuzz-password-1' };

let running: RunningServe;
let userToken: string;
let postIds: number[];
let mounts: { prefix: string; documentUrl: string; operations: Operation[] }[];

async function json(method: string, path: string, body: unknown, token?: string): Promise<{ status: number; body: any }> {
  const response = await request(`${running.url}${path}`, {
    method: method as 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  return { status: response.statusCode, body: await response.body.json() };
}

describe.each(BACKENDS)('the blog API against its own OpenAPI documents, on %s', (backend) => {
  beforeAll(async () => {
    // Without the login limits: the fuzz sends hundreds of logins from one address, and the limits would lock it out
    // before a valid one comes (test/auth/login-limits.test.ts holds them, their 429 and its documented shape).
    running = await startTestServe({ loginLimits: false }, backend);
    postIds = [];
    mounts = [];
    const created = await json('POST', '/api/users', USER);
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const login = await json('POST', '/api/v2/auth/login', { email: USER.email, password: USER.password });
    expect(login.status, JSON.stringify(login.body)).toBe(200);
    userToken = login.body.access_token;
    // Posts by the user and by the admin, so that PATCH meets both "yours" (200) and "someone else's" (403).
    for (const [token, title] of [
      [userToken, 'Fuzzing from the spec'],
      [userToken, 'Second post'],
      [running.adminToken, 'Admin notice'],
      [running.adminToken, 'Admin follow-up'],
    ] as const) {
      const post = await json('POST', '/api/v2/blog/posts', { title, content: `${title}: body`, tags: ['fuzz'] }, token);
      expect(post.status, JSON.stringify(post.body)).toBe(201);
      postIds.push(post.body.id);
    }
    for (const { prefix } of BLOG_MOUNTS) {
      const documentUrl = `${running.url}${prefix}/openapi.json`;
      const response = await request(documentUrl);
      expect(response.statusCode, `GET ${documentUrl}`).toBe(200);
      const document = (await response.body.json()) as Record<string, unknown>;
      mounts.push({ prefix, documentUrl, operations: operationsOf(document, documentUrl) });
    }
  });
  afterAll(async () => running?.close());

  it('each mount documents its operations under the mount, each with a unique operationId', () => {
    const problems: string[] = [];
    for (const mount of mounts) {
      expect(mount.operations.length, `${mount.documentUrl} lists no operation`).toBeGreaterThan(0);
      const ids = new Map<string, string>();
      for (const operation of mount.operations) {
        // Reports, generated clients and docs links name operations by their id.
        if (!operation.operationId) problems.push(`${mount.prefix}: ${operation.label} has no operationId`);
        else if (ids.has(operation.operationId))
          problems.push(`${mount.prefix}: ${operation.label} reuses operationId "${operation.operationId}" of ${ids.get(operation.operationId)}`);
        else ids.set(operation.operationId, operation.label);
        const url = new URL(operation.urlTemplate.replace(/\{[^}]+\}/g, 'x'));
        if (!url.pathname.startsWith(`${mount.prefix}/`)) problems.push(`${mount.prefix}: ${operation.label} resolves to ${url.pathname}, outside the mount`);
      }
    }
    expect(problems, problems.join('\n')).toEqual([]);
  });

  it('answers every generated request within the documented statuses and schemas', { timeout: 120_000 }, async () => {
    const tokens = { USER_TOKEN: userToken, ADMIN_TOKEN: running.adminToken };
    const hints = {
      post_id: postIds,
      username: [USER.username],
      email: [USER.email],
      password: [USER.password],
    };
    // A revocation uses up its token: each of its requests with the user's token gets a fresh login's instead.
    const mint = async () => (await json('POST', '/api/v2/auth/login', { email: USER.email, password: USER.password })).body.access_token as string;
    const consumesToken = { operationIds: ['revokeToken'], name: 'USER_TOKEN', mint };
    const log = await fuzz({
      operations: mounts.flatMap((mount) => mount.operations),
      tokens,
      hints,
      seed: SEED,
      runsPerOperation: RUNS_PER_OPERATION,
      consumesToken,
    });
    const health = await request(`${running.url}/health`);
    await health.body.dump();
    expect(health.statusCode, 'serve is still healthy after the fuzzing').toBe(200);
    expect(log.summary(), `${log.report()}\n\nUSER_TOKEN: POST /api/v2/auth/login as ${USER.email}; ADMIN_TOKEN: serve's admin token.`).toEqual([]);
  });
});
