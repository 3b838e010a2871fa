// The cluster's configuration: how many workers `workers` means, which databases can serve several, the restart
// back-off.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../config/config.js';
import { clusterRefusal, restartDelayMs, workerCount } from './cluster.js';

describe('workers', () => {
  it('defaults to 1 (one process, no cluster); WORKERS sets a number or auto', () => {
    expect(loadConfig([], {}).workers).toBe(1);
    expect(loadConfig([], { WORKERS: '3' }).workers).toBe(3);
    expect(loadConfig([], { WORKERS: 'auto' }).workers).toBe('auto');
    expect(workerCount({ workers: 'auto' }, 2)).toBe(2);
    expect(workerCount({ workers: 'auto' }, 0)).toBe(1);
    expect(workerCount({ workers: 4 }, 2)).toBe(4);
  });

  it.each(['0', '-1', '1.5', 'many', '257'])('refuses WORKERS=%s naming the key', (value) => {
    expect(() => loadConfig([], { WORKERS: value })).toThrow(ConfigError);
    expect(() => loadConfig([], { WORKERS: value })).toThrow(/workers/);
  });

  it('allows several workers on PostgreSQL, embedded or external, and refuses PGlite saying why', () => {
    expect(clusterRefusal({ embeddedEngine: 'postgres', databaseUrl: undefined })).toBeUndefined();
    expect(clusterRefusal({ embeddedEngine: 'pglite', databaseUrl: 'postgres://db/x' })).toBeUndefined();
    for (const engine of ['pglite', 'pglite-worker'] as const)
      expect(clusterRefusal({ embeddedEngine: engine, databaseUrl: undefined })).toMatch(
        /workers > 1 needs PostgreSQL.*PGlite.*databaseUrl/,
      );
  });

  it('restarts a dying worker after 0.5 s, doubling to at most 10 s', () => {
    expect([1, 2, 3, 4, 5, 6, 10].map(restartDelayMs)).toEqual([500, 1000, 2000, 4000, 8000, 10_000, 10_000]);
  });
});
