import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import LongestFirst from './test/sequencer.js';

// Node reads the machine's NODE_EXTRA_CA_CERTS bundle at every start (about 80 ms of CPU per process on this
// project's 2-core machines), and the suite starts hundreds of node processes: workers, serve, the CLI. Nothing
// in a test trusts it: tests reach only 127.0.0.1, and every TLS test brings its own CA.
delete process.env.NODE_EXTRA_CA_CERTS;

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    // One PostgreSQL server for the run; files make their own databases on it. The page tests' browser, installed
    // on a fresh machine where the run may (test/global-chromium.ts).
    globalSetup: ['test/global-chromium.ts', 'test/global-postgres.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // Tests must never reach beyond 127.0.0.1; nothing here needs a shell environment leak.
    unstubEnvs: true,
    // Many suites wait on servers, child processes and PostgreSQL rather than compute: one worker more than
    // there are cores keeps the cores busy (vitest's default is one fewer, a single worker on 2 cores).
    maxWorkers: availableParallelism() + 1,
    // A worker runs its files one after another in one module graph, rather than re-importing every module of
    // src/ for each file: no suite keeps state between files (each builds its own servers, stores and sandboxes).
    isolate: false,
    // The longest suites start first, also in a fresh clone that has no timings cached (test/sequencer.ts).
    sequence: { sequencer: LongestFirst },
  },
});
