/** `miniapp serve` in-process for tests: memory store, port 0, cheap password hashes, quiet. */
import { startServe, type RunningServe, type ServeOptions } from '../../src/server/serve.js';

export function startTestServe(overrides: Partial<ServeOptions> = {}): Promise<RunningServe> {
  return startServe({
    host: '127.0.0.1',
    port: 0,
    store: { kind: 'memory' },
    decrypt: {},
    logger: false,
    version: 'test',
    now: () => new Date(),
    grpc: false,
    hashCost: 10,
    ...overrides,
  });
}
