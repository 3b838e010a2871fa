// FHIR operations (https://hl7.org/fhir/R4/operations.html): one route per method and path, derived from the
// definitions in src/fhir/operations (ARCHITECTURE habit 4). HTTP in, an OperationInput out, the result replied.
import type { FastifyInstance, FastifyRequest, RouteHandlerMethod } from 'fastify';
import type { Db } from '../../storage/db.js';
import { resourceTypes } from '../../fhir/definitions/index.js';
import { OPERATIONS } from '../../fhir/operations/index.js';
import {
  operationMethods,
  type OperationDefinition,
  type OperationEnv,
  type OperationInput,
} from '../../fhir/operations/operation.js';
import { repoContext } from '../plugins/auth.js';
import { sendResult } from '../reply.js';

export interface OperationRouteDeps extends OperationEnv {
  clock: () => Date;
  newId: () => string;
  fhirBase: string;
  /** The database of a request to an operation that only reads (a read replica or the primary); default db. */
  reader?: (req: FastifyRequest) => Db;
}

type Query = Record<string, string | string[]>;

/** The URL paths (below the FHIR base) at which an operation is invoked. */
export function operationPaths(op: OperationDefinition): string[] {
  const at = op.level === 'instance' ? `/:id/$${op.code}` : `/$${op.code}`;
  if (op.level === 'system') return [at];
  if (op.types !== 'any' && op.types !== undefined) return op.types.map((t) => `/${t}${at}`);
  // Every type by name (a static segment, so `/AsyncJob/:id` cannot take `AsyncJob/$csv`), then any other name.
  return [...resourceTypes().map((t) => `/${t}${at}`), `/:type${at}`];
}

export function operationRoutes(app: FastifyInstance, deps: OperationRouteDeps): void {
  const env = {
    clock: deps.clock,
    newId: deps.newId,
    fhirBase: deps.fhirBase,
    conformance: deps.conformance,
  };
  const input = (req: FastifyRequest, type: string | undefined): OperationInput => {
    const params = req.params as { type?: string; id?: string };
    const prefer = req.headers.prefer;
    return {
      ctx: repoContext(req, env),
      type: params.type ?? type ?? '',
      id: params.id ?? '',
      request: {
        prefer: Array.isArray(prefer) ? prefer.join(',') : prefer,
        accept: req.headers.accept,
        query: req.query as Query,
        body: req.method === 'POST' ? req.body : undefined,
        url: `${deps.fhirBase}${req.url.replace(/^\/fhir\/R4/, '')}`,
      },
      warn: (obj, msg) => req.log.warn(obj, msg),
    };
  };
  const register = (scope: FastifyInstance, op: OperationDefinition): void => {
    for (const url of operationPaths(op)) {
      const type = /^\/([A-Z][A-Za-z]*)\//.exec(url)?.[1];
      const reader = op.replicaReads ? deps.reader : undefined;
      const handler: RouteHandlerMethod = async (req, reply) =>
        sendResult(
          reply,
          await op.run(reader ? { ...deps, db: reader(req) } : deps, input(req, type)),
          deps.fhirBase,
        );
      scope.route({
        method: [...operationMethods(op)],
        url,
        handler,
        ...(op.replicaReads ? { config: { readOnly: true } } : {}),
      });
    }
  };
  for (const op of OPERATIONS.filter((o) => !o.anyBody)) register(app, op);
  // An empty body is accepted whatever its Content-Type: a catch-all parser in this scope only.
  void app.register(async (scope) => {
    scope.addContentTypeParser('*', { parseAs: 'string' }, (_req, _body, done) => done(null, undefined));
    for (const op of OPERATIONS.filter((o) => o.anyBody)) register(scope, op);
  });
}
