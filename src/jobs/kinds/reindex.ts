// $reindex job (API.md §5): recomputes the search index rows of every current resource of the given types, in
// rid order, one transaction per batch.
import { reindexResources } from '../../fhir/search/index-writer.js';
import type { JobKind } from '../kind.js';

export interface ReindexParams {
  types: string[];
}

interface ReindexState {
  ti: number;
  after: number;
  total: number;
}

export function reindexKind(opts: { batchSize?: number } = {}): JobKind<ReindexState> {
  const batch = opts.batchSize ?? 500;
  return {
    async start() {
      return { ti: 0, after: 0, total: 0 };
    },
    async resume() {},
    async runStep(env, job, prev) {
      const { types } = job.params as unknown as ReindexParams;
      const s = { ...prev };
      while (s.ti < types.length) {
        const r = await env.db.query<{ rid: number }>(
          'SELECT rid FROM resources WHERE resource_type = $1 AND rid > $2 ORDER BY rid LIMIT $3',
          [types[s.ti], s.after, batch],
        );
        const rids = r.rows.map((x) => Number(x.rid));
        if (rids.length > 0) {
          s.total += await env.db.transaction((tx) => reindexResources(tx, rids));
          s.after = rids[rids.length - 1] as number;
        }
        if (rids.length < batch) {
          s.ti++;
          s.after = 0;
        }
        if (rids.length > 0) break;
      }
      return {
        state: s,
        done: s.ti >= types.length,
        progress: `Reindexed ${s.total} resources (${Math.min(s.ti, types.length)} of ${types.length} types)`,
      };
    },
    async cancel() {},
  };
}
