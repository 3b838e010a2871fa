// FHIR REST at /fhir/R4 (https://hl7.org/fhir/R4/http.html): HTTP in, typed calls to fhir/, results out.
// No SQL and no business rule here.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isResourceType } from '../../fhir/definitions/index.js';
import {
  activeTopicUrls,
  capabilityStatement,
  withSharedSearchParams,
  withSubscriptionTopics,
} from '../../fhir/capabilities.js';
import { handling } from '../../fhir/operations/export-params.js';
import { FhirError } from '../../fhir/outcome.js';
import { processBatch } from '../../fhir/repository/batch.js';
import type { RepoContext } from '../../fhir/repository/context.js';
import type { Conformance } from '../../fhir/conformance/model.js';
import type { SubscriptionHooks } from '../../fhir/subscriptions/subscription-writes.js';
import { conditionalDelete, conditionalPatch, conditionalUpdate } from '../../fhir/repository/conditional.js';
import { searchCompartment } from '../../fhir/repository/compartment-search.js';
import { createResource } from '../../fhir/repository/create.js';
import { deleteResource } from '../../fhir/repository/delete.js';
import { history } from '../../fhir/repository/history.js';
import { patchResource } from '../../fhir/repository/patch.js';
import { assertBody } from '../../fhir/repository/prepare.js';
import { readBinaryContent, readResource, vreadResource } from '../../fhir/repository/read.js';
import { subsetRead } from '../../fhir/search/summary.js';
import { searchResources } from '../../fhir/repository/search.js';
import { searchSystem } from '../../fhir/repository/search-system.js';
import { processTransaction } from '../../fhir/repository/transaction.js';
import { withAudit } from '../../fhir/repository/audit-writes.js';
import { updateResource } from '../../fhir/repository/update.js';
import { RawBytes, StreamedJson, type FhirResult } from '../../fhir/result.js';
import type { Db } from '../../storage/db.js';
import type { FileStore } from '../../storage/files.js';
import { repoContext } from '../plugins/auth.js';
import type { FormBody } from '../plugins/content-types.js';
import { conditionalRead, preferReturn, header } from '../header-semantics.js';
import { sendJsonText, sendResult } from '../reply.js';
import { binaryRoutes, wantsFhirBinary } from './binary.js';
import type { SearchParamRegistry } from '../../fhir/search/custom-registry.js';

export interface FhirRouteDeps {
  db: Db;
  /** The database of a read route's request (a read replica or the primary: http/plugins/read-routing.ts); default db. */
  reader?: (req: FastifyRequest) => Db;
  clock: () => Date;
  newId: () => string;
  fhirBase: string;
  maxBundleEntries: number;
  /** Config `allowedOutboundHosts`, for the save-time check of ClientApplication URLs (write-rules.ts). */
  allowedOutboundHosts?: readonly string[];
  /** Config `searchCountLimit` (repository/search.ts). */
  searchCountLimit?: number;
  /** The subscription engine's write hooks (API.md §8). */
  subscriptions?: SubscriptionHooks;
  /** Profiles, terminology and canonical resolution (API.md §9). */
  conformance?: Conformance;
  /** Custom search parameters: projects' SearchParameters and the shared ones (API.md §9 "Search"). */
  searchParams?: SearchParamRegistry;
  /** Told how many resources a request wrote (keeps planner statistics fresh during bulk loads). */
  written: (rows: number) => void;
  /** Where Binary contents live (absent: in their rows, as base64 `data`), and the largest raw upload in bytes. */
  binaries?: FileStore;
  binaryMaxBytes: number;
  /** Applies a FHIRPath Patch in the FHIRPath worker (RepoContext.fhirpathPatch). */
  fhirpathPatch?: (resource: string, parameters: string) => Promise<string>;
}

type Query = Record<string, string | string[]>;
type P<T> = { Params: T; Querystring: Query };

function assertType(type: string): void {
  if (!isResourceType(type))
    throw new FhirError('not-found', `Unknown resource type: ${type.slice(0, 64)}`, 'rest.unknown-type');
}

/** The request's URL as an absolute URL under the FHIR base (for self/next links). */
function selfUrl(deps: FhirRouteDeps, req: FastifyRequest): string {
  const path = req.url.replace(/^\/fhir\/R4/, '');
  return `${deps.fhirBase}${path}`;
}

const methodNotAllowed = (req: FastifyRequest): never => {
  throw new FhirError(
    'not-supported',
    `Method ${req.method} is not allowed on ${req.url.split('?')[0]}`,
    'rest.method',
    { status: 405 },
  );
};

/** A POST _search's parameters: the query string's and the form body's. */
function withForm(req: FastifyRequest): Query {
  const form = (req.body ?? {}) as FormBody;
  if (typeof form !== 'object' || Array.isArray(form)) {
    throw new FhirError(
      'invalid',
      'POST _search takes application/x-www-form-urlencoded parameters',
      'rest.search-body',
    );
  }
  const query: Query = { ...(req.query as Query) };
  for (const [k, raw] of Object.entries(form as Record<string, unknown>)) {
    // A form gives strings; a JSON body given instead may hold anything else.
    const v = [raw].flat().map((x) => {
      if (typeof x === 'string' || typeof x === 'number' || typeof x === 'boolean') return String(x);
      throw new FhirError(
        'invalid',
        `POST _search: parameter '${k.slice(0, 64)}' is not text`,
        'rest.search-value',
      );
    });
    const prev = query[k];
    query[k] = prev === undefined ? (v.length === 1 ? (v[0] as string) : v) : [...[prev].flat(), ...v];
  }
  return query;
}

const queryText = (query: Query): string =>
  new URLSearchParams(Object.entries(query).flatMap(([k, v]) => [v].flat().map((x) => [k, x]))).toString();

/** `Prefer: handling=lenient` on a search: unknown parameters are ignored (and named) rather than a 400. */
const lenient = (req: FastifyRequest): { lenient: boolean } => ({
  lenient: handling(header(req, 'prefer')) === 'lenient',
});

export function fhirRoutes(app: FastifyInstance, deps: FhirRouteDeps): void {
  const env = {
    clock: deps.clock,
    newId: deps.newId,
    fhirBase: deps.fhirBase,
    ...(deps.allowedOutboundHosts ? { allowedOutboundHosts: deps.allowedOutboundHosts } : {}),
    ...(deps.binaries ? { binaries: deps.binaries } : {}),
    ...(deps.subscriptions ? { subscriptions: deps.subscriptions } : {}),
    ...(deps.conformance ? { conformance: deps.conformance } : {}),
    ...(deps.searchParams ? { searchParams: deps.searchParams } : {}),
    ...(deps.fhirpathPatch ? { fhirpathPatch: deps.fhirpathPatch } : {}),
    ...(deps.searchCountLimit ? { searchCountLimit: deps.searchCountLimit } : {}),
  };
  const ctx = (req: FastifyRequest): RepoContext => repoContext(req, env);
  /** A read's database: searches, reads, vreads and history may be served by a read replica. */
  const r = deps.reader ?? (() => deps.db);
  /** A write's database and context: its transactions store the request's AuditEvent (and X-Provenance). */
  const w = (req: FastifyRequest): readonly [Db, RepoContext] => {
    const c = ctx(req);
    return [withAudit(deps.db, c), c];
  };
  const send = (reply: FastifyReply, r: FhirResult): FastifyReply => sendResult(reply, r, deps.fhirBase);
  /**
   * Sends a read's result; a large one (a Binary's content or its JSON, streamed) first takes a large-response slot
   * (plugins/large-bodies.ts), before any of it is read. A 304 and a HEAD send no body and take none.
   */
  const sendRead = async (req: FastifyRequest, reply: FastifyReply, r: FhirResult): Promise<FastifyReply> => {
    const bytes =
      r.body instanceof StreamedJson || r.body instanceof RawBytes ? (r.body.length ?? Infinity) : 0;
    if (r.status === 200 && req.method === 'GET') await app.largeResponse(req, reply, bytes);
    return send(reply, r);
  };
  // The shared search parameters come from the shared set, loaded on first use: the statement is built then.
  let built: Promise<{ statement: Record<string, unknown>; text: string }> | undefined;
  const metadata = (): Promise<{ statement: Record<string, unknown>; text: string }> =>
    (built ??= (async () => {
      const base = capabilityStatement(deps.fhirBase, deps.clock());
      const statement = withSharedSearchParams(base, (await deps.searchParams?.shared()) ?? []);
      return { statement, text: JSON.stringify(statement) };
    })());

  binaryRoutes(app, {
    db: deps.db,
    maxBytes: deps.binaryMaxBytes,
    ctx,
    send,
    written: deps.written,
    methodNotAllowed,
  });

  // Public; a caller with a valid token also sees its project's active SubscriptionTopics (API.md §8), so the answer
  // varies with Authorization. A missing or invalid token gets the public statement, never a 401.
  app.get('/metadata', { config: { public: true, principalIfAny: true } }, async (req, reply) => {
    const topics = req.principal ? await activeTopicUrls(deps.db, req.principal.projectId) : [];
    const meta = await metadata();
    const vary = reply.getHeader('vary');
    reply.header('vary', vary ? `${String(vary)}, Authorization` : 'Authorization');
    const statement = topics.length ? withSubscriptionTopics(meta.statement, topics) : meta.statement;
    return sendJsonText(reply, topics.length ? JSON.stringify(statement) : meta.text, statement);
  });

  app.post('/', async (req, reply) => {
    const type = (req.body as { type?: unknown } | undefined)?.type;
    const [db, c] = w(req);
    const r =
      type === 'transaction'
        ? await processTransaction(db, c, req.body, deps.maxBundleEntries)
        : await processBatch(db, c, req.body, deps.maxBundleEntries, (err) =>
            req.log.error({ err }, 'batch entry failed'),
          );
    const entries = (req.body as { entry?: unknown } | undefined)?.entry;
    deps.written(Array.isArray(entries) ? entries.length : 0);
    return send(reply, r);
  });

  // System-level search (https://hl7.org/fhir/R4/http.html#search): `GET {fhir}?_type=…` and `POST {fhir}/_search`.
  app.get<P<Record<string, never>>>('/', async (req, reply) =>
    send(reply, await searchSystem(r(req), ctx(req), req.query, selfUrl(deps, req))),
  );
  app.post<P<Record<string, never>>>('/_search', { config: { readOnly: true } }, async (req, reply) => {
    const query = withForm(req);
    return send(reply, await searchSystem(r(req), ctx(req), query, `${deps.fhirBase}?${queryText(query)}`));
  });

  app.get<P<{ type: string }>>('/:type', async (req, reply) => {
    assertType(req.params.type);
    return send(
      reply,
      await searchResources(r(req), ctx(req), req.params.type, req.query, selfUrl(deps, req), lenient(req)),
    );
  });

  app.post<P<{ type: string }>>('/:type/_search', { config: { readOnly: true } }, async (req, reply) => {
    assertType(req.params.type);
    const query = withForm(req);
    const self = `${deps.fhirBase}/${req.params.type}?${queryText(query)}`;
    return send(reply, await searchResources(r(req), ctx(req), req.params.type, query, self, lenient(req)));
  });

  app.post<P<{ type: string }>>('/:type', async (req, reply) => {
    assertType(req.params.type);
    const body = assertBody(req.body, req.params.type);
    const ifNoneExist = header(req, 'if-none-exist');
    const result = await createResource(...w(req), body, ifNoneExist ? { ifNoneExist } : {});
    deps.written(1);
    return send(reply, preferReturn(req, result));
  });

  // System, type and instance history share one handler: https://hl7.org/fhir/R4/http.html#history
  const historyHandler = async (
    req: FastifyRequest<P<{ type?: string; id?: string }>>,
    reply: FastifyReply,
  ) => {
    if (req.params.type !== undefined) assertType(req.params.type);
    const query = req.query as Record<string, string>;
    return send(
      reply,
      await history(r(req), ctx(req), req.params.type, req.params.id, query, selfUrl(deps, req)),
    );
  };
  app.get<P<Record<string, never>>>('/_history', historyHandler);
  app.get<P<{ type: string }>>('/:type/_history', historyHandler);
  app.get<P<{ type: string; id: string }>>('/:type/:id/_history', historyHandler);

  app.get<P<{ type: string; id: string }>>('/:type/:id', async (req, reply) => {
    assertType(req.params.type);
    const { type, id } = req.params;
    const result =
      type === 'Binary' && !wantsFhirBinary(req)
        ? await readBinaryContent(r(req), ctx(req), id)
        : subsetRead(await readResource(r(req), ctx(req), type, id), type, req.query);
    return sendRead(req, reply, conditionalRead(req, result));
  });

  // Compartment search: `Patient/<id>/Observation?…` (static paths such as `_history` and operations win).
  app.get<P<{ type: string; id: string; target: string }>>('/:type/:id/:target', async (req, reply) =>
    send(
      reply,
      await searchCompartment(
        r(req),
        ctx(req),
        req.params.type,
        req.params.id,
        req.params.target,
        req.query,
        selfUrl(deps, req),
      ),
    ),
  );

  app.put<P<{ type: string; id: string }>>('/:type/:id', async (req, reply) => {
    assertType(req.params.type);
    const body = assertBody(req.body, req.params.type);
    const ifMatch = header(req, 'if-match');
    return send(
      reply,
      preferReturn(
        req,
        await updateResource(...w(req), req.params.type, req.params.id, body, ifMatch ? { ifMatch } : {}),
      ),
    );
  });

  app.patch<P<{ type: string; id: string }>>('/:type/:id', async (req, reply) => {
    assertType(req.params.type);
    const ifMatch = header(req, 'if-match');
    return send(
      reply,
      preferReturn(
        req,
        await patchResource(...w(req), req.params.type, req.params.id, req.body, ifMatch ? { ifMatch } : {}),
      ),
    );
  });

  app.delete<P<{ type: string; id: string }>>('/:type/:id', async (req, reply) => {
    assertType(req.params.type);
    return send(reply, await deleteResource(...w(req), req.params.type, req.params.id));
  });

  app.get<P<{ type: string; id: string; vid: string }>>('/:type/:id/_history/:vid', async (req, reply) => {
    assertType(req.params.type);
    const { type, id, vid } = req.params;
    const result =
      type === 'Binary' && !wantsFhirBinary(req)
        ? await readBinaryContent(r(req), ctx(req), id, vid)
        : subsetRead(await vreadResource(r(req), ctx(req), type, id, vid), type, req.query);
    return sendRead(req, reply, conditionalRead(req, result));
  });

  // Conditional update, patch and delete: the query string is the search that picks the resource; without one
  // these methods are not allowed on a type.
  const condition = (req: FastifyRequest): string => {
    const q = req.url.split('?')[1] ?? '';
    return q === '' ? methodNotAllowed(req) : q;
  };
  app.put<P<{ type: string }>>('/:type', async (req, reply) => {
    assertType(req.params.type);
    const cond = condition(req);
    const body = assertBody(req.body, req.params.type);
    return send(reply, preferReturn(req, await conditionalUpdate(...w(req), req.params.type, cond, body)));
  });
  app.patch<P<{ type: string }>>('/:type', async (req, reply) => {
    assertType(req.params.type);
    const cond = condition(req);
    return send(reply, preferReturn(req, await conditionalPatch(...w(req), req.params.type, cond, req.body)));
  });
  app.delete<P<{ type: string }>>('/:type', async (req, reply) => {
    assertType(req.params.type);
    return send(reply, await conditionalDelete(...w(req), req.params.type, condition(req)));
  });

  // Everything else on these paths is a 405 with an OperationOutcome (not Fastify's plain 404).
  const writes = ['POST', 'PUT', 'DELETE', 'PATCH'] as const;
  const notAllowed: [string, readonly ('POST' | 'PUT' | 'DELETE' | 'PATCH')[]][] = [
    ['/', ['PUT', 'DELETE', 'PATCH']],
    ['/:type/:id', ['POST']],
    ['/:type/_history', writes],
    ['/:type/:id/_history', writes],
    ['/:type/:id/_history/:vid', writes],
    ['/metadata', writes],
  ];
  for (const [url, methods] of notAllowed) {
    app.route({
      method: [...methods],
      url,
      handler: methodNotAllowed,
      config: { public: url === '/metadata' },
    });
  }
}
