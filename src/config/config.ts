// Configuration (API.md §1): a JSON file named by --config or CINDER_CONFIG, then environment overrides,
// validated once by one schema into a frozen Config that is passed down. Nothing else reads process.env.
import fs from 'node:fs';
import { z } from 'zod';

const url = z.url({ protocol: /^https?$/ });

/** The embedded PostgreSQL's settings that embeddedPostgresSettings cannot change (a private Unix socket only). */
const EMBEDDED_POSTGRES_FIXED = new Set([
  'listen_addresses',
  'unix_socket_directories',
  'unix_socket_permissions',
  'unix_socket_group',
  'port',
  'max_connections',
  'cluster_name',
]);

const providerSchema = z
  .object({
    issuer: z.string().min(1),
    userInfoUrl: url,
    jwksUrl: url.optional(),
  })
  .strict();

export const configSchema = z
  .object({
    port: z.coerce.number().int().min(0).max(65535).default(8103),
    host: z.string().min(1).default('0.0.0.0'),
    baseUrl: url.optional(),
    dataDir: z.string().min(1).default('./data'),
    embeddedEngine: z.enum(['postgres', 'pglite', 'pglite-worker']).default('postgres'),
    databaseUrl: z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
      .optional(),
    /**
     * PostgreSQL streaming replicas (only with an external `databaseUrl`) that serve searches, reads, history, export
     * pages and views (src/storage/replicas.ts); writes, job claims and what a login just wrote stay on the primary.
     * The environment takes a comma-separated list.
     */
    databaseReadUrls: z
      .preprocess(
        (v) =>
          typeof v === 'string'
            ? v
                .split(',')
                .map((x) => x.trim())
                .filter(Boolean)
            : v,
        z.array(z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')).max(16),
      )
      .default([]),
    /** A replica whose replay lags more than this many milliseconds is skipped (reads go to the primary). */
    databaseReadMaxLagMs: z.coerce.number().int().min(10).max(3_600_000).default(5000),
    /** Milliseconds between two probes of each replica (its health and lag). */
    databaseReadCheckMs: z.coerce.number().int().min(50).max(60_000).default(1000),
    redisUrl: z
      .string()
      .regex(/^rediss?:\/\//, 'must be a redis:// URL')
      .optional(),
    admin: z
      .object({
        email: z.email().default('admin@example.com'),
        password: z.string().min(8).optional(),
        clientId: z
          .string()
          .regex(/^[A-Za-z0-9\-.]{1,64}$/, 'must be a valid FHIR id')
          .optional(),
        clientSecret: z.string().min(16).optional(),
      })
      .strict()
      .default({ email: 'admin@example.com' }),
    externalAuthProviders: z.array(providerSchema).default([]),
    accessTokenLifetime: z.coerce.number().int().min(60).max(86_400).default(3600),
    /** Largest accepted request body in bytes (default 32 MiB: every Synthea Bundle is below 3.4 MB). */
    maxBodySize: z.coerce
      .number()
      .int()
      .min(1024)
      .default(32 * 1024 * 1024),
    /** Largest raw Binary upload in bytes (any Content-Type but FHIR JSON to `{fhir}/Binary`); beyond it: 413. */
    binaryMaxBytes: z.coerce
      .number()
      .int()
      .min(1)
      .default(50 * 1024 * 1024),
    /**
     * FHIR packages (npm package names installed beside the server, or paths to a package `.tgz` or folder) whose
     * conformance resources are loaded at start and shared read-only by every project (API.md §9).
     */
    packages: z.array(z.string().min(1).max(1000)).max(100).default([]),
    /** Subscriptions that are not `off` one project may hold (API.md §8); one more answers 422 naming the limit. */
    maxSubscriptionsPerProject: z.coerce.number().int().min(0).default(1000),
    /** Seconds after which AuditEvents are deleted (API.md §10); 0 keeps them. */
    auditRetention: z.coerce.number().int().min(0).default(0),
    /** `stdout` also writes every AuditEvent as one JSON log line (API.md §10). */
    auditLog: z.enum(['none', 'stdout']).default('none'),
    /**
     * Whether requests are audited at all (API.md §10 says they are: this exists for the benchmark that measures what
     * auditing costs, and is not documented as a switch for deployments).
     */
    audit: z.boolean().default(true),
    /** Largest number of entries accepted in one batch or transaction Bundle. */
    maxBundleEntries: z.coerce.number().int().min(1).default(10_000),
    /** Largest total size of a request's line and headers in bytes (Node's maxHeaderSize); beyond it: 431. */
    maxHeaderSize: z.coerce
      .number()
      .int()
      .min(1024)
      .max(1024 * 1024)
      .default(16 * 1024),
    /**
     * Worker processes serving the port together (Node's cluster), each with its own pools: a number, or `auto` for
     * one per CPU; 1 (the default) runs one process and no cluster. More than 1 needs PostgreSQL (embedded or
     * databaseUrl), not PGlite.
     */
    workers: z.union([z.literal('auto'), z.coerce.number().int().min(1).max(256)]).default(1),
    /**
     * PostgreSQL settings of the embedded PostgreSQL (e.g. `{"shared_buffers": "256MB"}` on a machine with memory
     * to spare), over Cinder's own (embedded-postgres.ts); where and how it listens cannot be changed.
     */
    embeddedPostgresSettings: z
      .record(
        z
          .string()
          .regex(/^[a-z][a-z0-9_.]*$/, 'a PostgreSQL setting name')
          .refine(
            (k) => !EMBEDDED_POSTGRES_FIXED.has(k),
            'set by Cinder: the server listens on its own socket only',
          ),
        z.union([z.string().max(1000), z.number()]).transform(String),
      )
      .default({}),
    /** Connections of this process's PostgreSQL pool. */
    databasePoolSize: z.coerce.number().int().min(1).max(1000).default(20),
    /** Milliseconds to wait for a PostgreSQL connection before answering 503 (the database is unreachable). */
    databaseConnectTimeout: z.coerce.number().int().min(100).max(120_000).default(5000),
    /** Milliseconds to wait for Redis (connect and each command) before using the in-process fallback. */
    redisTimeout: z.coerce.number().int().min(50).max(60_000).default(2000),
    /** Milliseconds to wait for an external identity provider (userinfo, JWKS) before answering 401. */
    externalAuthTimeout: z.coerce.number().int().min(100).max(60_000).default(5000),
    /** On SIGTERM/SIGINT: milliseconds allowed for in-flight requests and job chunks before the process exits 1. */
    shutdownTimeout: z.coerce.number().int().min(0).max(600_000).default(30_000),
    /** Client IP from X-Forwarded-For (Fastify trustProxy): true, or the comma-separated addresses/CIDRs of the proxies. */
    trustProxy: z
      .preprocess(
        (v) => (v === 'true' ? true : v === 'false' ? false : v),
        z.union([z.boolean(), z.string().min(1)]),
      )
      .default(false),
    /** Guards against password and client secret guessing on /auth/login and /oauth2/token (0 turns a limit off). */
    rateLimit: z
      .object({
        /** Failed logins per client IP and identity (email or client_id) within failedLoginWindow. */
        failedLogins: z.coerce.number().int().min(0).default(10),
        /** Seconds. */
        failedLoginWindow: z.coerce.number().int().min(1).default(900),
        /** Requests per client IP to /auth/login and /oauth2/token within authRequestWindow, successful or not. */
        authRequests: z.coerce.number().int().min(0).default(300),
        /** Seconds. */
        authRequestWindow: z.coerce.number().int().min(1).default(60),
      })
      .strict()
      .default({ failedLogins: 10, failedLoginWindow: 900, authRequests: 300, authRequestWindow: 60 }),
    /** Jobs (AsyncJob: $export, $reindex, $expunge) run at once by each server process. */
    jobConcurrency: z.coerce.number().int().min(0).max(64).default(2),
    /** A running job's lease; a job whose server died is picked up again this long after its last heartbeat. */
    jobLeaseSeconds: z.coerce.number().int().min(2).max(3600).default(30),
    /** Pause after each chunk of a job (about 250 ms of work), leaving the database to interactive traffic. */
    jobPauseMs: z.coerce.number().int().min(0).max(60_000).default(0),
    /** Rows an export reads per query (and at most per chunk). */
    exportPageSize: z.coerce.number().int().min(1).max(100_000).default(2000),
    /**
     * Cells (rows × columns) one view of a `$viewdefinition-export` may write; beyond it the job fails with a
     * too-costly OperationOutcome naming this limit (its rows file and Parquet file are bounded by it).
     */
    viewExportMaxCells: z.coerce.number().int().min(1).default(50_000_000),
    /**
     * Matches a search counts for a total (`_total=accurate`, `_summary=count`, `_count=0`): beyond it the search
     * answers 400 too-costly naming this limit instead of reading every match; `_total=estimate` then answers the
     * planner's estimate. 0: no limit. `$csv`'s X-Total-Count is always counted. Counting 20,000 matches of a `code=`
     * took 0.35–0.5 s on a loaded 2-core machine (docs/incoming/search-plans.md): the default keeps a count under ~1 s.
     */
    searchCountLimit: z.coerce.number().int().min(0).default(50_000),
    /** Resources per export file: a type's file is split (`Patient.ndjson`, `Patient.2.ndjson`, ...) at this many. */
    exportFileResources: z.coerce.number().int().min(1).default(100_000),
    /**
     * Hosts (`host` or `host:port`) that URLs set by a project admin (ClientApplication.identityProvider,
     * ClientApplication.jwksUri) may name even when they resolve to loopback, private or link-local addresses.
     */
    allowedOutboundHosts: z.array(z.string().min(1)).default([]),
    /**
     * Origins whose browser pages may call the API (CORS on FHIR, OAuth and discovery): `["*"]`, the default, allows
     * any origin without cookies (the API takes bearer tokens); otherwise a list of `scheme://host[:port]`. The
     * environment takes a comma-separated list.
     */
    corsOrigins: z
      .preprocess(
        (v) =>
          typeof v === 'string'
            ? v
                .split(',')
                .map((x) => x.trim())
                .filter(Boolean)
            : v,
        z
          .array(z.string().regex(/^(\*|https?:\/\/[^/\s]+)$/, 'an origin (scheme://host[:port]) or *'))
          .min(1),
      )
      .default(['*']),
    /** Seconds after a bulk export job ends until its files and its `output` are deleted. */
    exportRetention: z.coerce.number().int().min(1).default(86_400),
    /** Running or queued exports one login (user or client) may have; one more kick-off answers 429. */
    maxActiveExportsPerUser: z.coerce.number().int().min(1).default(5),
    /** Milliseconds a client has to send a whole request (line, headers and body); then 408 and the connection closes. */
    requestTimeout: z.coerce.number().int().min(1000).max(600_000).default(30_000),
    /** Open connections one client address may hold; more are closed at once (0: no limit). */
    maxConnectionsPerClient: z.coerce.number().int().min(0).default(256),
    /**
     * Milliseconds a `$csv` (or CSV export page) may spend in FHIRPath beyond the fast path, and a FHIRPath Patch in
     * its paths; the worker thread that runs it is then stopped and the request answers 422 too-costly (the export
     * job fails).
     */
    fhirpathTimeout: z.coerce.number().int().min(100).max(600_000).default(10_000),
    /** PostgreSQL statement_timeout of request queries in milliseconds (0: none); beyond it the request answers 503. */
    statementTimeout: z.coerce.number().int().min(0).max(600_000).default(25_000),
    /**
     * The bearer token of `GET {base}metrics` (Prometheus text; docs: src/http/routes/metrics.ts). Unset: no metrics
     * are kept and the route answers 404. At least 32 characters.
     */
    metricsToken: z.string().min(32).max(1000).regex(/^\S+$/, 'must not contain spaces').optional(),
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    /** One `request completed` line (info) per request: for every request, only for 4xx/5xx answers, or none. */
    requestLog: z.enum(['all', 'errors', 'none']).default('all'),
  })
  .strict();

export type ConfigInput = z.input<typeof configSchema>;
export type Config = Readonly<z.output<typeof configSchema> & { baseUrl: string }>;

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

const ENV_KEYS: Record<string, string> = {
  PORT: 'port',
  HOST: 'host',
  BASE_URL: 'baseUrl',
  DATA_DIR: 'dataDir',
  DATABASE_URL: 'databaseUrl',
  DATABASE_READ_URLS: 'databaseReadUrls',
  DATABASE_READ_MAX_LAG_MS: 'databaseReadMaxLagMs',
  EMBEDDED_ENGINE: 'embeddedEngine',
  REDIS_URL: 'redisUrl',
  LOG_LEVEL: 'logLevel',
  REQUEST_LOG: 'requestLog',
  JOB_CONCURRENCY: 'jobConcurrency',
  TRUST_PROXY: 'trustProxy',
  JOB_LEASE_SECONDS: 'jobLeaseSeconds',
  JOB_PAUSE_MS: 'jobPauseMs',
  EXPORT_PAGE_SIZE: 'exportPageSize',
  EXPORT_FILE_RESOURCES: 'exportFileResources',
  SEARCH_COUNT_LIMIT: 'searchCountLimit',
  VIEW_EXPORT_MAX_CELLS: 'viewExportMaxCells',
  CORS_ORIGINS: 'corsOrigins',
  BINARY_MAX_BYTES: 'binaryMaxBytes',
  MAX_SUBSCRIPTIONS_PER_PROJECT: 'maxSubscriptionsPerProject',
  AUDIT_RETENTION: 'auditRetention',
  AUDIT_LOG: 'auditLog',
  METRICS_TOKEN: 'metricsToken',
  WORKERS: 'workers',
};

/** Validates raw input; a bad value throws one ConfigError line naming the key. */
export function parseConfig(input: unknown): Config {
  const result = configSchema.safeParse(input);
  if (!result.success) {
    const issue = result.error.issues[0];
    const key = issue?.path.join('.') || '(root)';
    throw new ConfigError(`Invalid configuration: ${key}: ${issue?.message ?? 'invalid'}`);
  }
  const c = result.data;
  let baseUrl = c.baseUrl ?? `http://localhost:${c.port}/`;
  if (!baseUrl.endsWith('/')) baseUrl += '/';
  if (c.databaseReadUrls.length > 0 && !c.databaseUrl) {
    throw new ConfigError(
      'Invalid configuration: databaseReadUrls: read replicas need an external PostgreSQL (databaseUrl)',
    );
  }
  const issuers = new Set<string>();
  for (const [i, p] of c.externalAuthProviders.entries()) {
    if (issuers.has(p.issuer)) {
      throw new ConfigError(
        `Invalid configuration: externalAuthProviders.${i}.issuer: duplicate issuer ${p.issuer}`,
      );
    }
    issuers.add(p.issuer);
  }
  return Object.freeze({ ...c, baseUrl });
}

/** Reads --config / CINDER_CONFIG and the environment overrides. */
export function loadConfig(argv: readonly string[], env: NodeJS.ProcessEnv): Config {
  const idx = argv.indexOf('--config');
  const file = idx >= 0 ? argv[idx + 1] : env.CINDER_CONFIG;
  let raw: Record<string, unknown> = {};
  if (file) {
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (err) {
      throw new ConfigError(`Cannot read configuration file ${file}: ${(err as Error).message}`);
    }
    try {
      raw = JSON.parse(text) as Record<string, unknown>;
    } catch (err) {
      throw new ConfigError(`Configuration file ${file} is not valid JSON: ${(err as Error).message}`);
    }
  }
  for (const [envKey, key] of Object.entries(ENV_KEYS)) {
    const v = env[envKey];
    if (v !== undefined && v !== '') raw[key] = v;
  }
  return parseConfig(raw);
}
