// Keeps PostgreSQL's planner statistics fresh during bulk loads. Autovacuum analyzes a table only after it grew by
// 10%, so while a fresh database is being filled the planner still believes the tables are tiny and picks nested
// loops that take seconds (seen: 13 s for one count during the Synthea load). After enough rows, ANALYZE runs in
// the background (at most one at a time per process, errors only logged).
import type { Db } from './db.js';

const TABLES =
  'resources, resource_history, sp_string, sp_token, sp_reference, sp_date, sp_number, sp_quantity, sp_uri, sp_identifier, sp_text, sp_lastn, sp_missing';

export interface StatisticsKeeper {
  /** Records that `rows` resources were written. */
  written(rows: number): void;
}

export function createStatisticsKeeper(
  db: Db,
  opts: {
    clock?: () => number;
    minRows?: number;
    minIntervalMs?: number;
    log?: { warn(o: object, m: string): void };
  } = {},
): StatisticsKeeper {
  const clock = opts.clock ?? Date.now;
  const minRows = opts.minRows ?? 1000;
  const minInterval = opts.minIntervalMs ?? 5000;
  let pending = 0;
  let total = 0;
  let last = 0;
  let running = false;
  return {
    written(rows) {
      pending += rows;
      // Early on (the tables were analyzed when small) analyze as soon as they doubled; later every minRows.
      const due = pending >= minRows || (pending >= 200 && pending >= total);
      if (!due || running || clock() - last < minInterval) return;
      running = true;
      total += pending;
      pending = 0;
      last = clock();
      db.exec(`ANALYZE ${TABLES}`)
        .catch((err: unknown) => opts.log?.warn({ err: (err as Error).message }, 'background ANALYZE failed'))
        .finally(() => {
          running = false;
        });
    },
  };
}
