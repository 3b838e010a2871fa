// Reliability of the server process (issue 6): SIGKILL in the middle of a transaction leaves no part of it
// visible (both embedded engines always; PostgreSQL when TEST_DATABASE_URL is set), and SIGTERM stops accepting
// connections, lets the in-flight request finish, gives a running job's lease back and exits 0 (PostgreSQL, whose
// jobs table the test reads while the server runs).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claim } from '../../src/jobs/queue.js';
import type { Db } from '../../src/storage/db.js';
import { startEmbeddedPostgres } from '../../src/storage/embedded-postgres.js';
import { openPglite } from '../../src/storage/pglite.js';
import { openPostgres } from '../../src/storage/postgres.js';
import { startTcpProxy } from '../support/tcp-proxy.js';
import {
  clientToken,
  exited,
  freePort,
  probe,
  startServer,
  waitHealthy,
  type ServerProcess,
} from '../support/server-process.js';

const PG_URL = process.env.TEST_DATABASE_URL;
/**
 * A backend in the middle of the request's large write: it holds a transaction id and has been open for a while. The
 * short transactions that run beside every request (the audit trail's batched inserts and sealer, token statistics, a
 * job's checkpoint) hold one too, but only for a moment: matching them let the tests act before the request wrote.
 */
const WRITING =
  "backend_xid IS NOT NULL AND query NOT LIKE '%audit%' AND clock_timestamp() - xact_start > interval '150 milliseconds'";
const CLIENT_ID = 'fault-client';
const CLIENT_SECRET = 'fault-secret-0123456789';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

/** A data directory and a configuration file naming the super administrator's client. */
function prepare(extra: Record<string, unknown> = {}): { dataDir: string; configFile: string } {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-fault-'));
  dirs.push(dataDir);
  const configFile = path.join(dataDir, 'cinder.json');
  fs.writeFileSync(
    configFile,
    JSON.stringify({
      admin: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET },
      logLevel: 'warn',
      ...extra,
    }),
  );
  return { dataDir, configFile };
}

function transaction(count: number, marker: string): string {
  const entry = Array.from({ length: count }, (_, i) => ({
    resource: {
      resourceType: 'Patient',
      identifier: [{ system: `urn:${marker}`, value: String(i) }],
      name: [{ family: `Fault${i}`, given: ['Test'] }],
      birthDate: '1970-01-01',
    },
    request: { method: 'POST', url: 'Patient' },
  }));
  return JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry });
}

function post(port: number, token: string, body: string): Promise<Response> {
  return fetch(`http://127.0.0.1:${port}/fhir/R4`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
    body,
  });
}

async function until(cond: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// Both embedded engines: PostgreSQL from npm (the default; its server outlives the killed process for the moment it
// takes to stop) and PGlite.
const EMBEDDED: { engine: string; open(dataDir: string): Promise<Db> }[] = [
  { engine: 'postgres', open: async (dataDir) => (await startEmbeddedPostgres(dataDir)).db },
  { engine: 'pglite', open: openPglite },
];

describe.each(EMBEDDED)(
  'SIGKILL during a transaction on the embedded database ($engine)',
  ({ engine, open }) => {
    it('leaves none of the transaction visible when the database is opened again, and keeps what was committed', async () => {
      // logLevel debug: requests are logged when they arrive ('request received'), not only when they complete.
      const { dataDir, configFile } = prepare({ logLevel: 'debug' });
      const port = await freePort();
      const server = startServer({
        CINDER_CONFIG: configFile,
        DATA_DIR: dataDir,
        PORT: String(port),
        EMBEDDED_ENGINE: engine,
      });
      try {
        await waitHealthy(port, server.child);
        const token = await clientToken(port, CLIENT_ID, CLIENT_SECRET);
        expect((await post(port, token, transaction(3, 'kept'))).status).toBe(200);

        const pending = post(port, token, transaction(5000, 'killed')).catch((err: Error) => err);
        // The second POST of a Bundle has arrived: its body is parsed in milliseconds, writing it takes seconds.
        const arrivals = () =>
          server.output().match(/"method":"POST","url":"\/fhir\/R4","msg":"request received"/g)?.length ?? 0;
        await until(async () => arrivals() >= 2, 10_000, 'the Bundle to arrive');
        await new Promise((r) => setTimeout(r, 400));
        server.child.kill('SIGKILL');
        await exited(server.child);
        expect(await pending).toBeInstanceOf(Error); // killed before it answered
      } finally {
        if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
      }

      // The killed process's lock is taken over; the database opens and holds only committed work.
      const db = await open(dataDir);
      try {
        const count = async (marker: string) =>
          (
            await db.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM resources WHERE content->'identifier'->0->>'system' = $1`,
              [`urn:${marker}`],
            )
          ).rows[0]?.n;
        expect(await count('killed')).toBe(0);
        expect(await count('kept')).toBe(3);
        const history = await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM resource_history WHERE content->'identifier'->0->>'system' = 'urn:killed'`,
        );
        expect(history.rows[0]?.n).toBe(0);
      } finally {
        await db.close();
      }
    });
  },
);

describe.skipIf(!PG_URL)('the server process on PostgreSQL', () => {
  const url = PG_URL as string;
  const schema = `t_proc_${randomBytes(5).toString('hex')}`;
  const appName = `cinder_${schema}`;
  let direct: Db | undefined;
  let server: ServerProcess | undefined;

  beforeAll(async () => {
    const admin = await openPostgres(url, { max: 1 });
    await admin.exec(`CREATE SCHEMA ${schema}`);
    await admin.close();
    direct = await openPostgres(url, { schema, max: 2 });
  });
  afterAll(async () => {
    if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
    await direct?.close();
    const admin = await openPostgres(url, { max: 1 });
    await admin.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.close();
  });

  /** The server's URL: our schema, and an application_name that finds its connections in pg_stat_activity. */
  const serverUrl = (base = url) => {
    const u = new URL(base);
    u.searchParams.set('options', `-c search_path=${schema}`);
    u.searchParams.set('application_name', appName);
    return u.toString();
  };

  const start = async (
    databaseUrl = serverUrl(),
    beforeHealthy?: () => Promise<void>,
  ): Promise<{ port: number; token: string }> => {
    const { dataDir, configFile } = prepare({ jobConcurrency: 1 });
    const port = await freePort();
    server = startServer({
      CINDER_CONFIG: configFile,
      DATA_DIR: dataDir,
      PORT: String(port),
      DATABASE_URL: databaseUrl,
    });
    await beforeHealthy?.();
    await waitHealthy(port, server.child);
    return { port, token: await clientToken(port, CLIENT_ID, CLIENT_SECRET) };
  };

  const backends = async (where = 'true'): Promise<number> =>
    (
      await (direct as Db).query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND ${where}`,
        [appName],
      )
    ).rows[0]?.n ?? 0;

  const tableCounts = async (): Promise<Record<string, number>> => {
    const tables = ['resources', 'resource_history', 'sp_string', 'sp_token', 'sp_date', 'sp_reference'];
    const out: Record<string, number> = {};
    for (const t of tables)
      out[t] =
        (await (direct as Db).query<{ n: number }>(`SELECT count(*)::int AS n FROM ${t}`)).rows[0]?.n ?? 0;
    return out;
  };

  it('SIGKILL during a transaction: no row of it is ever visible', async () => {
    const { port, token } = await start();
    const before = await tableCounts();

    const pending = post(port, token, transaction(10_000, 'killed')).catch((err: Error) => err);
    // Kill once the transaction has written rows (it has a transaction id) and is still open. It is as large as a
    // transaction may be (maxBundleEntries), so that it stays open a while even on a fast machine.
    await until(async () => (await backends(WRITING)) > 0, 20_000, 'the transaction to write');
    await new Promise((r) => setTimeout(r, 50));
    expect(await backends(WRITING)).toBeGreaterThan(0);
    server?.child.kill('SIGKILL');
    await exited((server as ServerProcess).child);
    expect(await pending).toBeInstanceOf(Error);
    // PostgreSQL rolls back when the dead process's connections close.
    await until(async () => (await backends()) === 0, 10_000, 'the server connections to close');
    expect(await tableCounts()).toEqual(before);
    const marked = await (direct as Db).query<{ n: number }>(
      `SELECT count(*)::int AS n FROM resources WHERE content->'identifier'->0->>'system' = 'urn:killed'`,
    );
    expect(marked.rows[0]?.n).toBe(0);
  });

  it('SIGTERM: refuses new connections, finishes the in-flight request, releases the job lease, exits 0', async () => {
    const { port, token } = await start();
    // Data for a job that takes several chunks.
    const loads = await Promise.all([0, 1, 2].map((i) => post(port, token, transaction(1000, `job${i}`))));
    for (const r of loads) expect(r.status).toBe(200);
    const kickoff = await fetch(`http://127.0.0.1:${port}/fhir/R4/$reindex?_type=Patient`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, prefer: 'respond-async' },
    });
    expect(kickoff.status).toBe(202);
    const jobId = /AsyncJob\/([^/?]+)/.exec(kickoff.headers.get('content-location') ?? '')?.[1] as string;
    expect(jobId).toBeTruthy();
    const job = async () =>
      (
        await (direct as Db).query<{ state: string; lease_owner: string | null; progress: string | null }>(
          'SELECT state, lease_owner, progress FROM jobs WHERE id = $1',
          [jobId],
        )
      ).rows[0];
    await until(async () => (await job())?.lease_owner != null, 10_000, 'the job to be claimed');

    let inFlightDone = 0;
    const inFlight = post(port, token, transaction(1500, 'inflight')).then((r) => {
      inFlightDone = Date.now();
      return r;
    });
    await until(async () => (await backends(WRITING)) > 0, 10_000, 'the request to write');
    const running = await job();
    expect(running).toMatchObject({ state: 'accepted' });
    expect(running?.lease_owner).not.toBeNull();

    const child = (server as ServerProcess).child;
    const sent = Date.now();
    child.kill('SIGTERM');
    let refusedAt = 0;
    await until(
      async () => {
        if ((await probe(port)) !== 'ECONNREFUSED') return false;
        refusedAt = Date.now();
        return true;
      },
      5000,
      'new connections to be refused',
    );
    const res = await inFlight;
    expect(res.status).toBe(200);
    const body = (await res.json()) as { entry: { response: { status: string } }[] };
    expect(body.entry).toHaveLength(1500);
    expect(body.entry.every((e) => e.response.status.startsWith('201'))).toBe(true);
    expect(refusedAt).toBeLessThan(inFlightDone);
    expect(await exited(child)).toBe(0);
    const exitedAt = Date.now();

    const after = await job();
    expect(after).toMatchObject({ state: 'accepted', lease_owner: null });
    expect(after?.progress).toMatch(/Reindexed/);
    // Claimable at once by any worker (the lease was given back, not left to expire).
    const claimed = await claim(direct as Db, 'another-worker', 30_000);
    expect(claimed?.id).toBe(jobId);
    console.info(
      `SIGTERM: refused new connections after ${refusedAt - sent} ms, in-flight request done after ` +
        `${inFlightDone - sent} ms, exit 0 after ${exitedAt - sent} ms`,
    );
  });

  it('starts when PostgreSQL comes up after it: retries with backoff, saying so', async () => {
    const target = new URL(url);
    const proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    await proxy.cut();
    const started = Date.now();
    try {
      const { port } = await start(serverUrl(proxy.url(url)), async () => {
        await until(
          async () => /PostgreSQL not reachable yet; retrying/.test((server as ServerProcess).output()),
          20_000,
          'the retry line',
        );
        await proxy.restore();
      });
      expect((server as ServerProcess).output()).toMatch(/"attempt":1,"waitMs":500,.*ECONNREFUSED/);
      expect(await probe(port)).toBe(200);
      console.info(`Start before PostgreSQL: healthy ${Date.now() - started} ms after start`);
      (server as ServerProcess).child.kill('SIGTERM');
      expect(await exited((server as ServerProcess).child)).toBe(0);
    } finally {
      await proxy.close();
    }
  });
});
