// AsyncJob status (API.md §5, https://hl7.org/fhir/uv/bulkdata/export.html#bulk-data-status-request):
// GET/DELETE {fhir}/AsyncJob/<id> and the download of export files. The operations that start and cancel jobs are
// routed from their definitions (operations.ts). Static segments win over the generic REST routes in the router.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Db } from '../../storage/db.js';
import type { FileStore } from '../../storage/files.js';
import type { Signals } from '../../storage/signals.js';
import type { RepoContext } from '../../fhir/repository/context.js';
import type { FhirResult } from '../../fhir/result.js';
import { readJobStatus } from '../../fhir/operations/async-job.js';
import { cancelAsyncJob } from '../../fhir/operations/cancel.js';
import { openJobOutput } from '../../fhir/operations/job-output.js';
import { repoContext } from '../plugins/auth.js';
import { sendResult } from '../reply.js';

export interface JobRouteDeps {
  db: Db;
  signals: Signals;
  files: FileStore;
  clock: () => Date;
  newId: () => string;
  fhirBase: string;
}

type Query = Record<string, string | string[]>;
type P<T> = { Params: T; Querystring: Query };

export function jobRoutes(app: FastifyInstance, deps: JobRouteDeps): void {
  const env = { clock: deps.clock, newId: deps.newId, fhirBase: deps.fhirBase };
  const ctx = (req: FastifyRequest): RepoContext => repoContext(req, env);
  const send = (reply: FastifyReply, r: FhirResult): FastifyReply => sendResult(reply, r, deps.fhirBase);
  const { db, signals } = deps;

  app.get<P<{ id: string }>>('/AsyncJob/:id', async (req, reply) =>
    send(reply, await readJobStatus(db, ctx(req), req.params.id)),
  );
  // Bulk Data IG cancel (DELETE on the status URL): the $cancel logic, answered 202 on success as the IG says.
  app.delete<P<{ id: string }>>('/AsyncJob/:id', async (req, reply) => {
    const r = await cancelAsyncJob(db, signals, ctx(req), req.params.id);
    return send(reply, { ...r, status: 202 });
  });
  app.get<P<{ id: string; file: string }>>('/AsyncJob/:id/output/:file', async (req, reply) => {
    const file = await openJobOutput(db, deps.files, ctx(req), req.params.id, req.params.file);
    return reply.type(file.contentType).send(file.stream);
  });
}
