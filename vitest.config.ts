import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'console/**/*.test.ts', 'console/**/*.test.tsx'],
    // Generous: process tests start real servers while other files run beside them; a hang still fails.
    testTimeout: 180_000,
    hookTimeout: 120_000,
    // Vitest 4: a worker busy for over 60 s no longer fails the run with "Timeout calling onTaskUpdate" (vitest 3's
    // fixed RPC timeout did, under load on a 2-core CI machine, with every test passing).
    pool: 'forks',
    // Vitest's default on a 2-core machine is one worker (cores - 1); most test time is spent waiting on a
    // database or a child process, so two files at a time finish the suite sooner.
    maxWorkers: 2,
  },
});
