// AsyncJob status (API.md §5, https://hl7.org/fhir/uv/bulkdata/export.html#bulk-data-status-request):
// GET/DELETE {fhir}/AsyncJob/<id> and the download of export files (gzip when asked). The operations that start and cancel jobs are
// routed from their definitions (operations.ts). Static segments win over the generic REST routes in the router.
import { pipeline } from 'node:stream';
import { constants, createGzip } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest, onSendHookHandler } from 'fastify';
import type { Db } from '../../storage/db.js';
import type { FileStore } from '../../storage/files.js';
import type { Signals } from '../../storage/signals.js';
import type { RepoContext } from '../../fhir/repository/context.js';
import type { FhirResult } from '../../fhir/result.js';
import { readJobStatus, wantsBulkStatus } from '../../fhir/operations/async-job.js';
import { deleteAsyncJob } from '../../fhir/operations/async-job-delete.js';
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

/** Whether an Accept-Encoding header accepts gzip (RFC 9110 §12.5.3: `gzip` or `x-gzip`, q above 0). */
export function acceptsGzip(header: string | undefined): boolean {
  return (header ?? '').split(',').some((part) => {
    const [coding, ...params] = part.split(';').map((x) => x.trim().toLowerCase());
    const q = params.find((x) => x.startsWith('q='));
    return (coding === 'gzip' || coding === 'x-gzip') && (q === undefined || Number(q.slice(2)) > 0);
  });
}

/**
 * A Bulk Data client that asked for `application/json` gets its OperationOutcomes (a failed job, a 404 after a delete
 * request, any error) labelled `application/json` too: the IG's "OperationOutcome in JSON format", and what BDT
 * parses. FHIR clients keep `application/fhir+json`.
 */
const bulkJson: onSendHookHandler = (req, reply, payload, done) => {
  if (
    wantsBulkStatus(req.headers.accept) &&
    /^application\/fhir\+json/.test(String(reply.getHeader('content-type')))
  )
    reply.header('content-type', 'application/json; charset=utf-8');
  done(null, payload);
};

type Query = Record<string, string | string[]>;
type P<T> = { Params: T; Querystring: Query };

export function jobRoutes(app: FastifyInstance, deps: JobRouteDeps): void {
  const env = { clock: deps.clock, newId: deps.newId, fhirBase: deps.fhirBase };
  const ctx = (req: FastifyRequest): RepoContext => repoContext(req, env);
  const send = (reply: FastifyReply, r: FhirResult): FastifyReply => sendResult(reply, r, deps.fhirBase);
  const { db, signals } = deps;

  app.get<P<{ id: string }>>('/AsyncJob/:id', { onSend: bulkJson }, async (req, reply) =>
    send(reply, await readJobStatus(db, ctx(req), req.params.id, req.headers.accept)),
  );
  app.delete<P<{ id: string }>>('/AsyncJob/:id', { onSend: bulkJson }, async (req, reply) =>
    send(reply, await deleteAsyncJob(db, signals, deps.files, ctx(req), req.params.id)),
  );
  app.get<P<{ id: string; file: string }>>('/AsyncJob/:id/output/:file', async (req, reply) => {
    const file = await openJobOutput(db, deps.files, ctx(req), req.params.id, req.params.file);
    reply.type(file.contentType).header('vary', 'accept-encoding');
    // Files are streamed as stored; a client that accepts gzip gets them compressed on the way, at zlib's fastest
    // level (nginx's default too): half the CPU of the default level for about a tenth more bytes of NDJSON. A
    // pipeline, so that a download given up also ends the reading of the file (pipe() would leave it open).
    if (!acceptsGzip(req.headers['accept-encoding'])) return reply.send(file.stream);
    return reply
      .header('content-encoding', 'gzip')
      .send(pipeline(file.stream, createGzip({ level: constants.Z_BEST_SPEED }), () => undefined));
  });
}
