// buildApp(deps): registers plugins and routes and returns the Fastify instance; it never listens.
import { randomUUID } from 'node:crypto';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import type { AuthDeps } from './auth/deps.js';
import type { KeyRing } from './auth/keys.js';
import type { Config } from './config/config.js';
import { registerAuth } from './http/plugins/auth.js';
import { registerAudit } from './http/plugins/audit.js';
import { createAuditWriter } from './audit/writer.js';
import { registerContentTypes } from './http/plugins/content-types.js';
import { LARGE_BODIES, registerLargeBodyLimit, type LargeBodyLimits } from './http/plugins/large-bodies.js';
import { registerCors } from './http/plugins/cors.js';
import { limitConnectionsPerClient } from './http/plugins/connection-limit.js';
import { clientErrorHandler, registerErrorHandler } from './http/plugins/errors.js';
import { registerLoginGuard } from './http/plugins/rate-limit.js';
import { contextLogger, registerRequestLog } from './http/plugins/request-log.js';
import { registerReadRouting } from './http/plugins/read-routing.js';
import { primaryOnly, type ReadRouter } from './storage/replicas.js';
import { adminRoutes } from './http/routes/admin.js';
import { consoleRoutes } from './http/routes/console.js';
import { fhirRoutes } from './http/routes/fhir.js';
import { jobRoutes } from './http/routes/jobs.js';
import { operationRoutes } from './http/routes/operations.js';
import { healthRoutes } from './http/routes/health.js';
import { oauthRoutes } from './http/routes/oauth.js';
import { registerWebsockets, subscriptionWsRoutes, type WsLimits } from './http/routes/subscription-ws.js';
import { wellKnownRoutes } from './http/routes/well-known.js';
import { createCsvRuntime, type CsvRuntime } from './fhir/csv/runtime.js';
import type { Db } from './storage/db.js';
import { fileStoreFor } from './storage/db-files.js';
import type { FileStore } from './storage/files.js';
import { createStatisticsKeeper } from './storage/statistics.js';
import { createTokenIssuer } from './auth/access-token.js';
import { AUTH_TYPES, createPrincipalCache } from './auth/principal-cache.js';
import type { Signals } from './storage/signals.js';
import type { Cache, Counters } from './storage/cache/cache.js';
import { createMemoryCache } from './storage/cache/memory.js';
import { createExternalValidator } from './auth/external/validate-external-token.js';
import { createSubscriptionEngine, type SubscriptionEngine } from './fhir/subscriptions/engine.js';
import { createBindingTokens, websocketUrl } from './fhir/subscriptions/binding-token.js';
import type { SocketHub } from './fhir/subscriptions/socket-hub.js';
import { createConformance } from './fhir/conformance/index.js';
import type { SharedSet, Terminology } from './fhir/conformance/model.js';
import { createSharedSet } from './fhir/conformance/shared-set.js';
import { createSearchParamRegistry } from './fhir/search/custom-registry.js';
import { JOBS_CHANNEL } from './jobs/queue.js';
import cluster from 'node:cluster';
import { createMetrics, type Metrics } from './metrics/metrics.js';
import { observeDb } from './storage/observed-db.js';
import { registerHttpMetrics } from './http/plugins/http-metrics.js';
import { metricsRoutes } from './http/routes/metrics.js';
import { clusterScrape } from './http/metrics-cluster.js';

/** Writes that may change who a token's login is: auth resource types, and any Bundle (it may hold them). */
function changesPrincipals(url: string): boolean {
  return writesTypes(url, AUTH_TYPES);
}

/** Writes that may change a project's subscriptions: Subscription and SubscriptionTopic, and any Bundle. */
function changesSubscriptions(url: string): boolean {
  return writesTypes(url, SUBSCRIPTION_TYPES);
}
const SUBSCRIPTION_TYPES: ReadonlySet<string> = new Set(['Subscription', 'SubscriptionTopic']);
const SEARCH_PARAMETER_TYPES: ReadonlySet<string> = new Set(['SearchParameter']);

function writesTypes(url: string, types: ReadonlySet<string>): boolean {
  const m = /^\/fhir\/R4\/?([A-Za-z]*)/.exec(url);
  if (!m) return false;
  return m[1] === '' || types.has(m[1] as string);
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Stores the buffered AuditEvents now (tests and benchmarks; the server stores them within a second anyway). */
    flushAudit?: () => Promise<void>;
  }
}

export interface AppDeps {
  config: Config;
  db: Db;
  signals: Signals;
  cache: Cache;
  /** Counters of the login rate limits (main passes the cache, shared through Redis); default in-process. */
  counters?: Counters;
  keys: KeyRing;
  /** Where job output files live (default: `<dataDir>/files` on local disk). */
  files?: FileStore;
  clock?: () => Date;
  newId?: () => string;
  logger?: FastifyBaseLogger;
  /** Where the built admin console is (default: dist/console, console.ts). */
  consoleDir?: string;
  /** The FHIRPath worker pool and `$csv` slots (main shares them with the export jobs); default: the app's own. */
  csv?: CsvRuntime;
  /**
   * The subscription engine (API.md §8); main builds it to start its delivery workers. Default: the app's own, whose
   * workers are not started (writes record events; nothing delivers them).
   */
  subscriptions?: SubscriptionEngine;
  /** The shared conformance set (API.md §9); default: loaded from `config.packages` (lazily, on first use). */
  sharedConformance?: SharedSet;
  /** The terminology search and validation ask (API.md §9); default: the conformance module's. Tests give their own. */
  terminology?: Terminology;
  /** Concurrency of requests with large bodies (http/plugins/large-bodies.ts); tests make them small. */
  largeBodies?: LargeBodyLimits;
  /**
   * The websocket hub of Subscriptions (the delivery engine announces events through it); default: one whose render
   * sends nothing. Closed with the app.
   */
  subscriptionSockets?: SocketHub;
  /** Websocket limits (http/routes/subscription-ws.ts); tests make them short. */
  websocketLimits?: Partial<WsLimits>;
  /** Where `auditLog: stdout` writes each AuditEvent's line (default: standard output); tests read it. */
  auditMirror?: (line: string) => void;
  /**
   * The metrics of this process (src/metrics), kept only when `config.metricsToken` is set; main shares them with the
   * job runner and the subscription deliverer. Default: the app's own.
   */
  metrics?: Metrics;
  /** The text of a metrics scrape; default: this process's metrics, or the cluster's aggregate in a cluster worker. */
  metricsScrape?: () => Promise<string>;
  /** Read replicas (config databaseReadUrls, storage/replicas.ts); main builds it. Default: every read on `db`. */
  reads?: ReadRouter;
}

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config } = deps;
  // Metrics only when the operator asked for them: otherwise nothing is timed or counted.
  const metrics = config.metricsToken ? (deps.metrics ?? createMetrics()) : undefined;
  const observed = metrics ? observeDb(deps.db, metrics.dbObserver('request')) : undefined;
  const db = observed ?? deps.db;
  const clock = deps.clock ?? (() => new Date());
  const newId = deps.newId ?? randomUUID;
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    bodyLimit: config.maxBodySize,
    // A whole request (line, headers, body) must arrive within requestTimeout, else 408 and close (slow bodies,
    // issue 12); Node checks its connections every connectionsCheckingInterval, so the cut comes promptly.
    requestTimeout: config.requestTimeout,
    http: {
      maxHeaderSize: config.maxHeaderSize,
      headersTimeout: Math.min(60_000, config.requestTimeout),
      connectionsCheckingInterval: Math.min(1000, config.requestTimeout),
    },
    clientErrorHandler,
    trustProxy: config.trustProxy,
    genReqId: () => randomUUID(),
    // Fastify's own two lines per request are replaced by one at completion (request-log.ts, config requestLog).
    logController: new LogController({ disableRequestLogging: true }),
    requestIdHeader: false,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 1000 },
    return503OnClosing: true,
    forceCloseConnections: 'idle',
  });
  limitConnectionsPerClient(app.server, config.maxConnectionsPerClient);
  const csv = deps.csv ?? createCsvRuntime({ fhirpathTimeout: config.fhirpathTimeout });
  if (!deps.csv) app.addHook('onClose', () => csv.fhirpath.close());
  const fhirBase = `${config.baseUrl}fhir/R4`;
  const subscriptions =
    deps.subscriptions ??
    createSubscriptionEngine({
      workerDb: db,
      signals: deps.signals,
      fhirBase,
      allowedOutboundHosts: config.allowedOutboundHosts,
      maxSubscriptionsPerProject: config.maxSubscriptionsPerProject,
    });
  const builtConformance = createConformance(
    db,
    deps.sharedConformance ?? createSharedSet({ packages: config.packages }),
  );
  const conformance = deps.terminology
    ? { ...builtConformance, terminology: deps.terminology }
    : builtConformance;
  // Modules below HTTP log through this: inside a request, their lines carry its reqId.
  const log = deps.logger ? contextLogger(deps.logger) : undefined;
  const searchParams = createSearchParamRegistry({
    signals: deps.signals,
    shared: conformance.shared,
    ...(log ? { log } : {}),
  });
  registerRequestLog(app, config.requestLog);
  if (metrics) registerHttpMetrics(app, metrics);
  const sockets = deps.subscriptionSockets ?? subscriptions.hub;
  const wsUrl = websocketUrl(config.baseUrl);
  const bindingTokens = createBindingTokens(deps.keys, config.baseUrl, wsUrl);
  // Before the other hooks: an upgrade request that a later hook refuses (401) must still have its socket closed.
  await registerWebsockets(app, sockets, deps.websocketLimits);
  const statistics = createStatisticsKeeper(db, log ? { log } : {});
  const auth: AuthDeps = {
    db,
    tokens: createTokenIssuer(deps.keys, config.baseUrl),
    clock,
    newId,
    accessTokenLifetime: config.accessTokenLifetime,
    allowedOutboundHosts: config.allowedOutboundHosts,
    principals: createPrincipalCache(deps.signals),
    ...(config.externalAuthProviders.length
      ? {
          external: createExternalValidator({
            providers: config.externalAuthProviders,
            cache: deps.cache,
            clock,
            timeoutMs: config.externalAuthTimeout,
            log: log ?? { warn: () => undefined },
          }),
        }
      : {}),
  };
  // Once close() has begun (SIGTERM), responses of the requests still in flight end their connections: a kept-alive
  // connection would otherwise hold close() open until the client drops it (Fastify keeps them 72 s).
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  // A callback hook: a read (most requests) goes on without a promise; a write waits for what it changed.
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    if (closing) reply.header('connection', 'close');
    if (request.method === 'GET' || request.method === 'HEAD') return done(null, payload);
    afterWrite(request, reply).then(
      () => done(null, payload),
      (err: unknown) => done(err as Error),
    );
  });
  /** What a write (any method but GET and HEAD) changed, announced before its answer leaves. */
  const afterWrite = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const wrote = reply.statusCode < 400;
    // After commit (the reply is being sent) and before the client can send its next request.
    if (wrote && changesPrincipals(request.url)) await auth.principals.changed();
    // Also after a failed write: a rolled-back transaction may have loaded (and kept) what it was about to store.
    if (changesSubscriptions(request.url) && request.principal) {
      const actor = request.principal;
      await subscriptions.registry.changed(actor.superAdmin ? '*' : actor.projectId);
    }
    // A project's SearchParameters are its search parameters from the reply on (API.md §9); its reindex job waits.
    if (writesTypes(request.url, SEARCH_PARAMETER_TYPES) && request.principal) {
      const actor = request.principal;
      await searchParams.changed(actor.superAdmin ? '*' : actor.projectId);
      if (wrote) await deps.signals.publish(JOBS_CHANNEL, 'new').catch(() => undefined);
    }
  };
  registerErrorHandler(app);
  await registerCors(app, config.corsOrigins);
  registerContentTypes(app, { xmlOffThread: (text) => csv.fhirpath.xml(text) });
  // Before authentication, so that a refused token is recorded too (API.md §10).
  if (config.audit) {
    const writer = createAuditWriter({
      db,
      ...(config.auditLog === 'stdout'
        ? { mirror: deps.auditMirror ?? ((line: string) => void process.stdout.write(`${line}\n`)) }
        : {}),
      ...(log ? { log } : {}),
    });
    // A graceful stop (SIGTERM closes the app) stores what is buffered.
    app.addHook('onClose', () => writer.close());
    app.decorate('flushAudit', () => writer.flush());
    metrics?.watchAuditBacklog(() => writer.buffered());
    registerAudit(app, { writer, env: { newId, clock, server: { fhirBase, baseUrl: config.baseUrl } } });
  }
  registerAuth(app, auth);
  const reader = registerReadRouting(app, deps.reads ?? primaryOnly(db));
  app.decorate('largeBodies', registerLargeBodyLimit(app, deps.largeBodies ?? LARGE_BODIES));
  const loginGuard = await registerLoginGuard(app, {
    counters: deps.counters ?? createMemoryCache({ max: 10_000 }),
    limits: config.rateLimit,
  });
  healthRoutes(app, { db, cache: deps.cache, ...(deps.reads ? { replicas: deps.reads } : {}) });
  if (metrics && observed && config.metricsToken) {
    metrics.watchPool('request', observed);
    metrics.watchQueues(db);
    const reads = deps.reads;
    if (reads?.enabled) metrics.watchReplicas(() => reads.status());
    metricsRoutes(app, {
      token: config.metricsToken,
      scrape:
        deps.metricsScrape ?? (cluster.isWorker ? clusterScrape(metrics.registry) : () => metrics.scrape()),
      contentType: metrics.contentType,
    });
  }
  wellKnownRoutes(app, { keys: deps.keys, baseUrl: config.baseUrl });
  oauthRoutes(app, auth, { loginGuard, baseUrl: config.baseUrl });
  adminRoutes(app, { db, clock, newId, fhirBase, membershipsChanged: () => auth.principals.changed() });
  consoleRoutes(app, { baseUrl: config.baseUrl, ...(deps.consoleDir ? { dir: deps.consoleDir } : {}) });
  subscriptionWsRoutes(app, {
    hub: sockets,
    tokens: bindingTokens,
    clock,
    ...(deps.websocketLimits ? { limits: deps.websocketLimits } : {}),
  });
  // Export files and Binary contents share one store (API.md §1 dataDir, or PostgreSQL's file_chunks).
  const files = deps.files ?? fileStoreFor(deps.db, config.dataDir);
  await app.register(
    async (f) => {
      operationRoutes(f, {
        db,
        signals: deps.signals,
        clock,
        newId,
        fhirBase,
        maxActiveExportsPerUser: config.maxActiveExportsPerUser,
        csv,
        wsBinding: { tokens: bindingTokens, url: wsUrl },
        conformance,
        reader,
      });
      jobRoutes(f, {
        db,
        signals: deps.signals,
        files,
        clock,
        newId,
        fhirBase,
      });
      fhirRoutes(f, {
        db,
        reader,
        clock,
        newId,
        fhirBase,
        maxBundleEntries: config.maxBundleEntries,
        allowedOutboundHosts: config.allowedOutboundHosts,
        searchCountLimit: config.searchCountLimit,
        subscriptions: subscriptions.hooks,
        conformance,
        searchParams,
        written: statistics.written,
        binaries: files,
        binaryMaxBytes: config.binaryMaxBytes,
        fhirpathPatch: (resource, parameters) => csv.fhirpath.patch(resource, parameters),
      });
    },
    { prefix: '/fhir/R4' },
  );
  return app;
}
