// A Cinder app on a test database, with the super administrator bootstrapped and helpers to log in.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect } from 'vitest';
import type { FastifyBaseLogger, FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { buildApp } from '../../src/app.js';
import { ensureSuperAdmin } from '../../src/auth/bootstrap.js';
import { loadKeyRing } from '../../src/auth/keys.js';
import { parseConfig, type Config, type ConfigInput } from '../../src/config/config.js';
import type { Db } from '../../src/storage/db.js';
import path from 'node:path';
import { localSignals, type Signals } from '../../src/storage/signals.js';
import { localFileStore, type FileStore } from '../../src/storage/files.js';
import { createJobRunner, type JobRunner, type RunnerOptions } from '../../src/jobs/runner.js';
import { createRetentionSweeper, type RetentionSweeper } from '../../src/jobs/retention.js';
import { defaultKinds } from '../../src/jobs/kinds/index.js';
import { createMemoryCache, type Cache, type Counters } from '../../src/storage/cache/index.js';
import type { TestDatabase } from './db.js';
import {
  createSubscriptionEngine,
  type EngineOptions,
  type SubscriptionEngine,
} from '../../src/fhir/subscriptions/engine.js';
import type { LargeBodyLimits } from '../../src/http/plugins/large-bodies.js';
import type { SharedSet, Terminology } from '../../src/fhir/conformance/model.js';
import { createSharedSet } from '../../src/fhir/conformance/shared-set.js';
import { createSearchParamRegistry } from '../../src/fhir/search/custom-registry.js';
import type { SocketHub, SocketLimits } from '../../src/fhir/subscriptions/socket-hub.js';
import type { WsLimits } from '../../src/http/routes/subscription-ws.js';
import type { Metrics } from '../../src/metrics/metrics.js';
import type { ReadRouter } from '../../src/storage/replicas.js';

export const ADMIN_CLIENT_ID = 'test-admin-client';
export const ADMIN_CLIENT_SECRET = 'test-admin-secret-0123456789';

export interface TestApp {
  app: FastifyInstance;
  db: Db;
  config: Config;
  fhir: string;
  superProjectId: string;
  /** Access token of the super administrator's ClientApplication. */
  adminToken: string;
  request(opts: InjectOptions & { token?: string | null }): Promise<LightMyRequestResponse>;
  token(clientId: string, secret: string): Promise<string>;
  /** Creates a project with an admin ClientApplication (and optionally a non-admin one); returns their tokens. */
  newProject(name?: string): Promise<{ projectId: string; adminToken: string; memberToken: string }>;
  /** The subscription engine (its deliverer started when `extras.deliver` asked for it). */
  subscriptions: SubscriptionEngine;
  /** The job runner, when `extras.jobs` asked for one. */
  runner?: JobRunner;
  /** The export retention sweeper, started beside the job runner (`sweepOnce()` after advancing the clock). */
  retention?: RetentionSweeper;
  close(): Promise<void>;
}

export interface TestAppExtras {
  clock?: () => Date;
  cache?: Cache;
  /** Counters of the login rate limits (default: in-process). */
  counters?: Counters;
  /** Share an open database with another test app (a second server instance); it is not closed by this one. */
  db?: Db;
  /** Cross-instance signals (default: in-process). */
  signals?: Signals;
  /** The app's (and the job runner's) logger; default none. */
  logger?: FastifyBaseLogger;
  /** Where job files live (default: under `<dataDir>/files`). */
  files?: FileStore;
  /** Where the built admin console is (default: dist/console). */
  consoleDir?: string;
  /** Concurrency of requests with large bodies (default: the server's). */
  largeBodies?: LargeBodyLimits;
  /**
   * Start the subscription delivery workers with these options (API.md §8); without it, writes record events and
   * nothing delivers them.
   */
  deliver?: NonNullable<EngineOptions['delivery']>;
  /** The websocket hub of Subscriptions (default: the app's own, which renders nothing). */
  subscriptionSockets?: SocketHub;
  /** The shared conformance set (API.md §9; default: the one `config.packages` names). */
  sharedConformance?: SharedSet;
  /** A Terminology in place of the conformance module's (search modifier tests). */
  terminology?: Terminology;
  /** The subscription hub's limits (default: the server's). */
  socketLimits?: Partial<SocketLimits>;
  /** Websocket limits (default: the server's). */
  websocketLimits?: Partial<WsLimits>;
  /** Where `auditLog: stdout` writes each AuditEvent line (default: standard output). */
  auditMirror?: (line: string) => void;
  /** The app's metrics (kept when `metricsToken` is set), shared with the job runner and the deliverer. */
  metrics?: Metrics;
  /** The text of a metrics scrape (default: the app's metrics). */
  metricsScrape?: () => Promise<string>;
  /** Read replicas (storage/replicas.ts) for the app and the job runner (default: every read on the primary). */
  reads?: ReadRouter;
  /** Start a job runner with these options. */
  jobs?: Partial<Pick<RunnerOptions, 'afterChunk' | 'leaseMs' | 'pollMs' | 'concurrency' | 'maxAttempts'>> & {
    exportPageSize?: number;
  };
}

export async function startTestApp(
  database: TestDatabase,
  overrides: Partial<ConfigInput> = {},
  extras: TestAppExtras = {},
): Promise<TestApp> {
  const db = extras.db ?? (await database.open());
  const config = parseConfig({
    baseUrl: 'http://cinder.test/',
    admin: {
      email: 'admin@example.com',
      password: 'admin-password-1',
      clientId: ADMIN_CLIENT_ID,
      clientSecret: ADMIN_CLIENT_SECRET,
    },
    logLevel: 'silent',
    ...overrides,
  });
  const boot = await ensureSuperAdmin(
    db,
    { clock: () => new Date(), newId: randomUUID, fhirBase: `${config.baseUrl}fhir/R4` },
    config.admin,
  );
  const keys = await loadKeyRing(db);
  const signals = extras.signals ?? localSignals();
  const files = extras.files ?? localFileStore(path.join(config.dataDir, 'files'));
  const clock = extras.clock ?? (() => new Date());
  const cache = extras.cache ?? createMemoryCache({ max: 1000, clock: () => clock().getTime() });
  const subscriptions = createSubscriptionEngine({
    workerDb: db,
    signals,
    fhirBase: `${config.baseUrl}fhir/R4`,
    allowedOutboundHosts: config.allowedOutboundHosts,
    maxSubscriptionsPerProject: config.maxSubscriptionsPerProject,
    ...(extras.logger ? { log: extras.logger } : {}),
    delivery: {
      pollMs: 50,
      ...(extras.metrics ? { onDelivered: extras.metrics.subscriptionDelivered } : {}),
      ...extras.deliver,
    },
    ...(extras.socketLimits ? { socketLimits: extras.socketLimits } : {}),
  });
  if (extras.deliver) subscriptions.deliverer.start();
  // One shared set for the app and the job runner (a reindex writes the shared search parameters' rows).
  const sharedConformance = extras.sharedConformance ?? createSharedSet({ packages: config.packages });
  const app = await buildApp({
    subscriptions,
    sharedConformance,
    ...(extras.terminology ? { terminology: extras.terminology } : {}),
    config,
    db,
    keys,
    signals,
    cache,
    files,
    ...(extras.counters ? { counters: extras.counters } : {}),
    ...(extras.consoleDir ? { consoleDir: extras.consoleDir } : {}),
    ...(extras.largeBodies ? { largeBodies: extras.largeBodies } : {}),
    ...(extras.subscriptionSockets ? { subscriptionSockets: extras.subscriptionSockets } : {}),
    ...(extras.websocketLimits ? { websocketLimits: extras.websocketLimits } : {}),
    ...(extras.logger ? { logger: extras.logger } : {}),
    ...(extras.clock ? { clock: extras.clock } : {}),
    ...(extras.auditMirror ? { auditMirror: extras.auditMirror } : {}),
    ...(extras.metrics ? { metrics: extras.metrics } : {}),
    ...(extras.metricsScrape ? { metricsScrape: extras.metricsScrape } : {}),
    ...(extras.reads ? { reads: extras.reads } : {}),
  });
  let runner: JobRunner | undefined;
  let retention: RetentionSweeper | undefined;
  if (extras.jobs) {
    const { exportPageSize, ...runnerOpts } = extras.jobs;
    runner = createJobRunner({
      env: {
        db,
        files,
        fhirBase: `${config.baseUrl}fhir/R4`,
        clock,
        newId: randomUUID,
        searchParams: createSearchParamRegistry({
          signals,
          shared: sharedConformance,
        }),
        ...(extras.metrics ? { wrote: extras.metrics.jobWrote } : {}),
        ...(extras.reads ? { reads: extras.reads } : {}),
      },
      signals,
      // Small pages, one per step: jobs stay running long enough for tests to act on them.
      kinds: defaultKinds({
        export: {
          ...(exportPageSize ? { pageSize: exportPageSize, pagesPerStep: 1 } : {}),
          fileResources: config.exportFileResources,
        },
        viewExportMaxCells: config.viewExportMaxCells,
      }),
      concurrency: config.jobConcurrency,
      pollMs: 200,
      ...(extras.logger ? { log: extras.logger } : {}),
      ...runnerOpts,
    });
    runner.start();
    retention = createRetentionSweeper({
      env: { db, files, fhirBase: `${config.baseUrl}fhir/R4`, clock, newId: randomUUID },
      retentionSeconds: config.exportRetention,
    });
    retention.start();
  }
  const fhir = '/fhir/R4';
  const request: TestApp['request'] = ({ token, headers, ...rest }) =>
    app.inject({
      ...rest,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(rest.payload !== undefined && typeof rest.payload === 'object'
          ? { 'content-type': 'application/fhir+json' }
          : {}),
        ...headers,
      },
    });
  const token = async (clientId: string, secret: string): Promise<string> => {
    const res = await tokenRequest(app, {
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: secret,
    });
    if (res.statusCode !== 200) throw new Error(`login failed: ${res.statusCode} ${res.body}`);
    return (res.json() as { access_token: string }).access_token;
  };
  const adminToken = await token(ADMIN_CLIENT_ID, ADMIN_CLIENT_SECRET);
  const t: TestApp = {
    app,
    db,
    config,
    fhir,
    superProjectId: boot.projectId,
    adminToken,
    request,
    token,
    async newProject(name = `Project ${randomUUID().slice(0, 8)}`) {
      const post = async (resource: Record<string, unknown>): Promise<Record<string, unknown>> => {
        const res = await request({
          method: 'POST',
          url: `${fhir}/${resource.resourceType as string}`,
          token: adminToken,
          payload: resource,
        });
        if (res.statusCode !== 201)
          throw new Error(`create ${resource.resourceType as string} failed: ${res.statusCode} ${res.body}`);
        return res.json() as Record<string, unknown>;
      };
      const project = await post({ resourceType: 'Project', name });
      const projectId = project.id as string;
      const client = async (admin: boolean): Promise<string> => {
        const secret = `secret-${randomUUID()}`;
        const c = await post({
          resourceType: 'ClientApplication',
          name: `${name} ${admin ? 'admin' : 'member'}`,
          secret,
          meta: { project: projectId },
        });
        await post({
          resourceType: 'ProjectMembership',
          meta: { project: projectId },
          project: { reference: `Project/${projectId}` },
          user: { reference: `ClientApplication/${c.id as string}` },
          profile: { reference: `ClientApplication/${c.id as string}` },
          admin,
        });
        return token(c.id as string, secret);
      };
      return { projectId, adminToken: await client(true), memberToken: await client(false) };
    },
    subscriptions,
    ...(runner ? { runner } : {}),
    ...(retention ? { retention } : {}),
    async close() {
      await subscriptions.deliverer.stop();
      await retention?.stop();
      await runner?.stop();
      await app.close();
      if (!extras.db) await db.close();
    },
  };
  return t;
}

/**
 * A test app for a whole suite, with one project whose admin token most tests use: started before the suite,
 * closed after it. Read `ctx.t` and `ctx.token` inside tests (they are set once the suite has started).
 */
export function useProjectApp(
  database: TestDatabase,
  overrides: Partial<ConfigInput> = {},
  extras: TestAppExtras = {},
): { t: TestApp; token: string } {
  const ctx = {} as { t: TestApp; token: string };
  beforeAll(async () => {
    ctx.t = await startTestApp(database, overrides, extras);
    ctx.token = (await ctx.t.newProject()).adminToken;
  });
  afterAll(async () => ctx.t?.close());
  return ctx;
}

/** POSTs form fields to /oauth2/token and returns the answer, whatever it is. */
export function tokenRequest(
  app: FastifyInstance,
  fields: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'POST',
    url: '/oauth2/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    payload: new URLSearchParams(fields).toString(),
  });
}

/** Creates `resource` (POST to `{fhir}/<its type>`) and returns the answer, whatever it is. */
export function postResource(
  t: TestApp,
  token: string | null,
  resource: Record<string, unknown>,
): Promise<LightMyRequestResponse> {
  return t.request({
    method: 'POST',
    url: `${t.fhir}/${String(resource.resourceType)}`,
    token,
    payload: resource,
  });
}

/** Creates `resource`, expecting `201`, and returns the stored resource. */
export async function created(
  t: TestApp,
  token: string,
  resource: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const res = await postResource(t, token, resource);
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as Record<string, unknown>;
}

/**
 * An access token of a new ClientApplication of the project, a member (an admin with `admin`), asking only for
 * `scope` (e.g. `system/Patient.rs`): the narrowly scoped caller of the hostile tests.
 */
export async function scopedClientToken(
  t: TestApp,
  adminToken: string,
  projectId: string,
  scope: string,
  opts: { admin?: boolean } = {},
): Promise<string> {
  const secret = `a-secret-of-a-scoped-client-${randomUUID()}`;
  const client = await created(t, adminToken, { resourceType: 'ClientApplication', name: 'Scoped', secret });
  await created(t, adminToken, {
    resourceType: 'ProjectMembership',
    project: { reference: `Project/${projectId}` },
    user: { reference: `ClientApplication/${client.id as string}` },
    profile: { reference: `ClientApplication/${client.id as string}` },
    ...(opts.admin ? { admin: true } : {}),
  });
  const tok = await tokenRequest(t.app, {
    grant_type: 'client_credentials',
    client_id: client.id as string,
    client_secret: secret,
    scope,
  });
  expect(tok.statusCode, tok.body).toBe(200);
  return tok.json().access_token as string;
}

/** POSTs a batch or transaction Bundle of the given entries to the FHIR base. */
export function postBundle(
  t: TestApp,
  token: string,
  type: 'batch' | 'transaction',
  entry: Record<string, unknown>[],
): Promise<LightMyRequestResponse> {
  return t.request({ method: 'POST', url: t.fhir, token, payload: { resourceType: 'Bundle', type, entry } });
}

/** Creates each named resource in one batch (every entry must answer 201) and gives each name its new id. */
export async function createNamed(
  t: TestApp,
  token: string,
  named: Record<string, Record<string, unknown>>,
): Promise<Record<string, string>> {
  const keys = Object.keys(named);
  const res = await postBundle(
    t,
    token,
    'batch',
    keys.map((k) => ({ resource: named[k], request: { method: 'POST', url: named[k]!.resourceType } })),
  );
  if (res.statusCode !== 200) throw new Error(`batch answered ${res.statusCode}: ${res.body}`);
  const ids: Record<string, string> = {};
  (res.json().entry as { response: { status: string; location: string } }[]).forEach((e, n) => {
    if (!e.response.status.startsWith('201'))
      throw new Error(`entry ${keys[n]} answered ${JSON.stringify(e)}`);
    ids[keys[n] as string] = e.response.location.split('/')[1] as string;
  });
  return ids;
}

/** `Type/id` of every entry's resource of a Bundle, in order. */
export const bundleRefs = (bundle: Record<string, unknown>): string[] =>
  ((bundle.entry as { resource: Record<string, unknown> }[] | undefined) ?? []).map(
    (e) => `${e.resource.resourceType as string}/${e.resource.id as string}`,
  );

/** A Bundle entry that creates `resource`. */
export const createEntry = (
  resource: Record<string, unknown>,
  fullUrl?: string,
): Record<string, unknown> => ({
  ...(fullUrl ? { fullUrl } : {}),
  resource,
  request: { method: 'POST', url: resource.resourceType },
});

/** POSTs an invite (API.md §3) to `/admin/projects/<projectId>/invite` and returns the answer, whatever it is. */
export function inviteRequest(
  t: Pick<TestApp, 'request'>,
  token: string,
  projectId: string,
  body: Record<string, unknown>,
): Promise<LightMyRequestResponse> {
  return t.request({
    method: 'POST',
    url: `/admin/projects/${projectId}/invite`,
    token,
    headers: { 'content-type': 'application/json' },
    payload: body,
  });
}

/** Sets a User's password as the super administrator (`POST /admin/users/<id>/password`), expecting `200`. */
export async function setUserPassword(
  t: Pick<TestApp, 'request' | 'adminToken'>,
  userId: string,
  password: string,
): Promise<void> {
  const res = await t.request({
    method: 'POST',
    url: `/admin/users/${userId}/password`,
    token: t.adminToken,
    headers: { 'content-type': 'application/json' },
    payload: { password },
  });
  expect(res.statusCode, res.body).toBe(200);
}

/**
 * The AuditEvents `token` finds with `query` (API.md §10), once `until` holds: reads' AuditEvents are stored in
 * batches (within a second), so the search is repeated after flushing the buffer until they are there.
 */
export async function auditEvents(
  t: TestApp,
  token: string,
  query: string,
  until: (events: Record<string, unknown>[]) => boolean = (e) => e.length > 0,
): Promise<Record<string, unknown>[]> {
  let events: Record<string, unknown>[] = [];
  for (let i = 0; i < 60; i++) {
    await t.app.flushAudit?.();
    const res = await t.request({ method: 'GET', url: `${t.fhir}/AuditEvent?${query}`, token });
    expect(res.statusCode, res.body).toBe(200);
    events = ((res.json() as { entry?: { resource: Record<string, unknown> }[] }).entry ?? []).map(
      (e) => e.resource,
    );
    if (until(events)) return events;
    await new Promise((r) => setTimeout(r, 25));
  }
  return events;
}
