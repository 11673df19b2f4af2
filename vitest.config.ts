import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    // One PostgreSQL server for the run; files make their own databases on it.
    globalSetup: ['test/global-postgres.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // Tests must never reach beyond 127.0.0.1; nothing here needs a shell environment leak.
    unstubEnvs: true,
  },
});
