/**
 * serve builds its embedded sandbox while the store opens (src/server/serve.ts):
 * when the store cannot be opened, the start fails with the store's error,
 * and the sandbox built meanwhile is closed (its port is free again).
 */
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { startTestServe } from '../helpers/serve.js';
import { freePort } from '../helpers/embedded-postgres.js';

/** Whether something may listen on 127.0.0.1:port now. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

describe('a start whose store cannot be opened', () => {
  it("fails with the store's error and closes the sandbox built meanwhile", async () => {
    const [sandboxPort, nothing] = [await freePort(), await freePort()];
    const started = startTestServe({
      sandboxPort,
      store: { kind: 'postgres', url: `postgres://miniapp:secret@127.0.0.1:${nothing}/miniapp`, poolSize: 1, timeoutMs: 1000 },
    });
    await expect(started).rejects.toThrow(/127\.0\.0\.1|connect|reach/i);
    expect(await portFree(sandboxPort)).toBe(true);
  });
});
