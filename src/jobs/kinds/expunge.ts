// $expunge?everything=true job (API.md §5): permanently deletes a project's resources — current rows, history,
// search index rows and credentials — in batches, one transaction each, so it can be cancelled between batches. The
// contents of the batch's Binaries are deleted from the file store after its transaction commits (a crash between the
// two leaves files no row points to, never a row without its content).
import { deleteBinaryContents } from '../../fhir/repository/binary-content.js';
import { deleteIndex } from '../../fhir/search/index-writer.js';
import type { JobKind } from '../kind.js';

export interface ExpungeParams {
  projectId: string;
}

interface ExpungeState {
  total: number;
}

export function expungeKind(opts: { batchSize?: number } = {}): JobKind<ExpungeState> {
  const batch = opts.batchSize ?? 500;
  return {
    async start() {
      return { total: 0 };
    },
    async resume() {},
    async runStep(env, job, prev) {
      const { projectId } = job.params as unknown as ExpungeParams;
      const binaries: string[] = [];
      const n = await env.db.transaction(async (tx) => {
        // The job's own AsyncJob is kept (it may live in the expunged project) so its status can be read.
        const r = await tx.query<{ rid: number; resource_type: string; id: string }>(
          `SELECT rid, resource_type, id FROM resources
           WHERE project_id = $1 AND NOT (resource_type = 'AsyncJob' AND id = $2) LIMIT $3 FOR UPDATE`,
          [projectId, job.id, batch],
        );
        const rids = r.rows.map((x) => Number(x.rid));
        if (rids.length === 0) return 0;
        binaries.push(...r.rows.filter((x) => x.resource_type === 'Binary').map((x) => x.id));
        await deleteIndex(tx, rids);
        await tx.query('DELETE FROM resource_history WHERE rid = ANY($1::bigint[])', [rids]);
        await tx.query(
          `DELETE FROM credentials c USING resources r
           WHERE r.rid = ANY($1::bigint[]) AND c.resource_type = r.resource_type AND c.id = r.id`,
          [rids],
        );
        await tx.query('DELETE FROM resources WHERE rid = ANY($1::bigint[])', [rids]);
        return rids.length;
      });
      await deleteBinaryContents(env.files, binaries);
      const s = { total: prev.total + n };
      return { state: s, done: n < batch, progress: `Expunged ${s.total} resources` };
    },
    async cancel() {},
  };
}
