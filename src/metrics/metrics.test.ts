// The read replicas' gauges (metrics.ts watchReplicas): one series per configured replica, labelled by its name, from
// the router's last probe; what is unknown is left out; a cluster's aggregate shows the worst worker's view.
import client from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { ReplicaStatus } from '../storage/replicas.js';
import { createMetrics } from './metrics.js';

const lines = (text: string): string[] => text.split('\n').filter((l) => l.startsWith('cinder_db_replica_'));

describe('read replica metrics', () => {
  it('shows each replica up, in use, its lag and the WAL bytes it is behind, as last probed', async () => {
    const m = createMetrics({ processMetrics: false });
    let status: ReplicaStatus[] = [
      { name: 'r1:5433/cinder', state: 'ok', lagMs: 0, behindBytes: 0, replayLsn: '0/10' },
      { name: 'r2:5432/cinder', state: 'lagging', lagMs: 7250, behindBytes: 123456 },
      { name: 'r3:5432/cinder', state: 'down', reason: 'connect ECONNREFUSED' },
      { name: 'r4:5432/cinder', state: 'lagging' },
      { name: 'r5:5432/cinder', state: 'not-standby', reason: 'not a streaming replica' },
      { name: 'r6:5432/cinder', state: 'unknown' },
    ];
    m.watchReplicas(() => status);
    const scrape = lines(await m.scrape());
    expect(scrape).toEqual(
      expect.arrayContaining([
        'cinder_db_replica_up{replica="r1:5433/cinder"} 1',
        'cinder_db_replica_up{replica="r2:5432/cinder"} 1',
        'cinder_db_replica_up{replica="r3:5432/cinder"} 0',
        'cinder_db_replica_up{replica="r5:5432/cinder"} 0',
        'cinder_db_replica_up{replica="r6:5432/cinder"} 0',
        'cinder_db_replica_in_use{replica="r1:5433/cinder"} 1',
        'cinder_db_replica_in_use{replica="r2:5432/cinder"} 0',
        'cinder_db_replica_in_use{replica="r3:5432/cinder"} 0',
        'cinder_db_replica_lag_seconds{replica="r1:5433/cinder"} 0',
        'cinder_db_replica_lag_seconds{replica="r2:5432/cinder"} 7.25',
        // Lagging by more than the probes can tell.
        'cinder_db_replica_lag_seconds{replica="r4:5432/cinder"} +Inf',
        'cinder_db_replica_behind_bytes{replica="r1:5433/cinder"} 0',
        'cinder_db_replica_behind_bytes{replica="r2:5432/cinder"} 123456',
      ]),
    );
    // Nothing is said of the lag of a replica that is not up.
    for (const name of ['r3', 'r5', 'r6'])
      expect(scrape.filter((l) => l.includes(name) && /_(lag_seconds|behind_bytes)\{/.test(l))).toEqual([]);
    // The reasons are for the logs, not for labels.
    expect(scrape.join('\n')).not.toMatch(/ECONNREFUSED|streaming replica/);
    // The next scrape reads the state again: a replica back in use, and one no longer configured gone.
    status = [{ name: 'r3:5432/cinder', state: 'ok', lagMs: 12, behindBytes: 0 }];
    const next = lines(await m.scrape());
    expect(next).toContain('cinder_db_replica_in_use{replica="r3:5432/cinder"} 1');
    expect(next).toContain('cinder_db_replica_lag_seconds{replica="r3:5432/cinder"} 0.012');
    expect(next.filter((l) => l.includes('r1:5433'))).toEqual([]);
  });

  it('shows no replica series without replicas', async () => {
    const m = createMetrics({ processMetrics: false });
    expect(lines(await m.scrape())).toEqual([]);
  });

  it("aggregates a cluster's workers to the worst view: down or unused if one worker says so, the largest lag", async () => {
    const a = createMetrics({ processMetrics: false });
    const b = createMetrics({ processMetrics: false });
    a.watchReplicas(() => [{ name: 'r1:5432/c', state: 'ok', lagMs: 100, behindBytes: 10 }]);
    b.watchReplicas(() => [{ name: 'r1:5432/c', state: 'lagging', lagMs: 9000, behindBytes: 5000 }]);
    const merged = client.AggregatorRegistry.aggregate([
      await a.registry.getMetricsAsJSON(),
      await b.registry.getMetricsAsJSON(),
    ]);
    expect(lines(await merged.metrics())).toEqual(
      expect.arrayContaining([
        'cinder_db_replica_up{replica="r1:5432/c"} 1',
        'cinder_db_replica_in_use{replica="r1:5432/c"} 0',
        'cinder_db_replica_lag_seconds{replica="r1:5432/c"} 9',
        'cinder_db_replica_behind_bytes{replica="r1:5432/c"} 5000',
      ]),
    );
  });
});
