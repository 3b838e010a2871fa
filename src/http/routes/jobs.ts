// Asynchronous operations and AsyncJob status (API.md §5): $export (system, Patient, Group), $reindex, $expunge,
// GET/DELETE {fhir}/AsyncJob/<id>, $cancel and the download of export files. Registered under /fhir/R4 before the
// generic REST routes match these paths (static segments win in the router). HTTP in, typed calls out.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Db } from '../../storage/db.js';
import type { FileStore } from '../../storage/files.js';
import type { Signals } from '../../storage/signals.js';
import type { RepoContext } from '../../fhir/repository/context.js';
import type { FhirResult } from '../../fhir/result.js';
import { readJobStatus } from '../../fhir/operations/async-job.js';
import type { AsyncRequest } from '../../fhir/operations/async-start.js';
import { cancelAsyncJob } from '../../fhir/operations/cancel.js';
import { startExport } from '../../fhir/operations/export.js';
import { startExpunge } from '../../fhir/operations/expunge.js';
import { openJobOutput } from '../../fhir/operations/job-output.js';
import { startReindex } from '../../fhir/operations/reindex.js';
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
  const asyncRequest = (req: FastifyRequest): AsyncRequest => {
    const prefer = req.headers.prefer;
    return {
      prefer: Array.isArray(prefer) ? prefer.join(',') : prefer,
      query: req.query as Query,
      body: req.method === 'POST' ? req.body : undefined,
      url: `${deps.fhirBase}${req.url.replace(/^\/fhir\/R4/, '')}`,
    };
  };
  const { db, signals } = deps;

  for (const method of ['GET', 'POST'] as const) {
    app.route({
      method,
      url: '/$export',
      handler: async (req, reply) =>
        send(reply, await startExport(db, signals, ctx(req), { kind: 'system' }, asyncRequest(req))),
    });
    app.route({
      method,
      url: '/Patient/$export',
      handler: async (req, reply) =>
        send(reply, await startExport(db, signals, ctx(req), { kind: 'patient' }, asyncRequest(req))),
    });
    app.route<P<{ id: string }>>({
      method,
      url: '/Group/:id/$export',
      handler: async (req, reply) =>
        send(
          reply,
          await startExport(
            db,
            signals,
            ctx(req),
            { kind: 'group', groupId: req.params.id },
            asyncRequest(req),
          ),
        ),
    });
  }
  app.post('/$reindex', async (req, reply) =>
    send(reply, await startReindex(db, signals, ctx(req), asyncRequest(req))),
  );
  app.post<P<{ id: string }>>('/Project/:id/$expunge', async (req, reply) =>
    send(reply, await startExpunge(db, signals, ctx(req), req.params.id, asyncRequest(req))),
  );

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
  // $cancel accepts an empty body whatever its Content-Type (API.md §5): a catch-all parser in this scope only.
  void app.register(async (scope) => {
    scope.addContentTypeParser('*', { parseAs: 'string' }, (_req, _body, done) => done(null, undefined));
    scope.post<P<{ id: string }>>('/AsyncJob/:id/$cancel', async (req, reply) =>
      send(reply, await cancelAsyncJob(db, signals, ctx(req), req.params.id)),
    );
  });
}
