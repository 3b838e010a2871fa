// $reindex job (API.md §5): recomputes the search index rows of every current resource of the given types, in
// rid order, one transaction per batch. With `projectId`, only that project's resources: the job that storing a
// SearchParameter starts (API.md §9 "Search"), an AsyncJob of that project.
import { reindexResources, type ExtraIndex } from '../../fhir/search/index-writer.js';
import type { JobEnv, JobKind } from '../kind.js';

export interface ReindexParams {
  types: string[];
  /** Only the resources of this project. */
  projectId?: string;
}

interface ReindexState {
  ti: number;
  after: number;
  total: number;
}

/** The custom parameters' values of each resource (each project's own and the shared ones). */
function customIndex(env: JobEnv): ExtraIndex | undefined {
  const registry = env.searchParams;
  if (!registry) return undefined;
  return async (tx, resources) => {
    const out = [];
    for (const { projectId, resource } of resources) {
      out.push((await registry.forProject(tx, projectId)).extract(resource));
    }
    return out;
  };
}

export function reindexKind(opts: { batchSize?: number } = {}): JobKind<ReindexState> {
  const batch = opts.batchSize ?? 500;
  return {
    async start() {
      return { ti: 0, after: 0, total: 0 };
    },
    async resume() {},
    async runStep(env, job, prev) {
      const { types, projectId } = job.params as unknown as ReindexParams;
      const s = { ...prev };
      const extra = customIndex(env);
      while (s.ti < types.length) {
        const r = await env.db.query<{ rid: number }>(
          `SELECT rid FROM resources WHERE resource_type = $1 AND rid > $2
           ${projectId ? 'AND project_id = $4' : ''} ORDER BY rid LIMIT $3`,
          [types[s.ti], s.after, batch, ...(projectId ? [projectId] : [])],
        );
        const rids = r.rows.map((x) => Number(x.rid));
        if (rids.length > 0) {
          s.total += await env.db.transaction((tx) => reindexResources(tx, rids, extra));
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
