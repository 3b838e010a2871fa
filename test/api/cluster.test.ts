// Cluster mode (issue 30 point 4): `workers: 2` runs two worker processes on one port and one database. Requests on
// new connections are answered by both workers (their request log lines name them), what one writes the other reads,
// a worker killed with SIGKILL is restarted while the other keeps answering, and SIGTERM to the primary stops every
// process with exit code 0. On the embedded PostgreSQL (the primary owns it) and on PostgreSQL (TEST_DATABASE_URL).
// PGlite runs inside one process: workers > 1 on it is refused at start.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres } from '../../src/storage/postgres.js';
import { clientToken, exited, freePort, startServer, type ServerProcess } from '../support/server-process.js';

const PG_URL = process.env.TEST_DATABASE_URL;
const CLIENT_ID = 'cluster-client';
const CLIENT_SECRET = 'cluster-secret-0123456789';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

function prepare(extra: Record<string, unknown> = {}): { dataDir: string; configFile: string } {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-cluster-'));
  dirs.push(dataDir);
  const configFile = path.join(dataDir, 'cinder.json');
  fs.writeFileSync(
    configFile,
    JSON.stringify({
      admin: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET },
      logLevel: 'info',
      jobConcurrency: 1,
      ...extra,
    }),
  );
  return { dataDir, configFile };
}

async function until(cond: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface LogLine {
  msg?: string;
  worker?: number | string;
  pid?: number;
  reqId?: string;
  workerSlot?: number;
  workerPid?: number;
}

function lines(server: ServerProcess): LogLine[] {
  return server
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => {
      try {
        return JSON.parse(l) as LogLine;
      } catch {
        return {};
      }
    });
}

/** The pid of the worker whose request log line carries reqId (waiting for the line to be written). */
async function answeredBy(server: ServerProcess, reqId: string): Promise<number> {
  let pid: number | undefined;
  await until(
    () => {
      pid = lines(server).find((l) => l.reqId === reqId && l.msg === 'request completed')?.pid;
      return pid !== undefined;
    },
    10_000,
    `the log line of request ${reqId}`,
  );
  return pid as number;
}

/**
 * A request on its own connection (no keep-alive): the cluster's primary hands each to the next worker. A connection
 * handed to a worker at the moment it is killed is never answered (Node's round-robin handoff loses it): the client's
 * timeout ends it, as a client's would.
 */
function request(
  port: number,
  method: string,
  urlPath: string,
  token: string,
  body?: string,
): Promise<{ status: number; reqId: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path: urlPath,
        agent: false,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body ? { 'content-type': 'application/fhir+json' } : {}),
        },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, reqId: String(res.headers['x-request-id']), body: text }),
        );
        res.on('error', reject);
      },
    );
    req.setTimeout(20_000, () => req.destroy(new Error('no answer within 20 s')));
    req.on('error', reject);
    req.end(body);
  });
}

const listening = (server: ServerProcess): { slot: number; pid: number }[] =>
  lines(server)
    .filter((l) => l.msg === 'worker is listening')
    .map((l) => ({ slot: l.workerSlot as number, pid: l.workerPid as number }));

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

interface Backend {
  name: string;
  skip: boolean;
  env(): Record<string, string>;
  setup?(): Promise<void>;
  teardown?(): Promise<void>;
}

const schema = `t_cluster_${randomBytes(5).toString('hex')}`;
const BACKENDS: Backend[] = [
  { name: 'the embedded PostgreSQL', skip: false, env: () => ({}) },
  {
    name: 'PostgreSQL (databaseUrl)',
    skip: !PG_URL,
    env: () => {
      const u = new URL(PG_URL as string);
      u.searchParams.set('options', `-c search_path=${schema}`);
      return { DATABASE_URL: u.toString() };
    },
    setup: async () => {
      const admin = await openPostgres(PG_URL as string, { max: 1 });
      await admin.exec(`CREATE SCHEMA ${schema}`);
      await admin.close();
    },
    teardown: async () => {
      const admin = await openPostgres(PG_URL as string, { max: 1 });
      await admin.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.close();
    },
  },
];

const METRICS_TOKEN = 'cluster-metrics-token-0123456789abcdef';

describe.each(BACKENDS)('WORKERS=2 on $name', (backend) => {
  let server: ServerProcess;
  let port: number;
  let token: string;

  beforeAll(async () => {
    if (backend.skip) return;
    await backend.setup?.();
    const { dataDir, configFile } = prepare();
    port = await freePort();
    server = startServer({
      CINDER_CONFIG: configFile,
      DATA_DIR: dataDir,
      PORT: String(port),
      WORKERS: '2',
      METRICS_TOKEN: METRICS_TOKEN,
      ...backend.env(),
    });
    await until(
      () => {
        if (server.child.exitCode !== null) throw new Error(`exited: ${server.output()}`);
        return lines(server).some((l) => l.msg === 'all workers are ready');
      },
      180_000,
      'both workers',
    );
    token = await clientToken(port, CLIENT_ID, CLIENT_SECRET);
  }, 240_000);

  afterAll(async () => {
    if (backend.skip) return;
    if (server.child.exitCode === null && server.child.signalCode === null) {
      server.child.kill('SIGKILL');
      for (const w of listening(server)) if (alive(w.pid)) process.kill(w.pid, 'SIGKILL');
    }
    await backend.teardown?.();
  });

  it.skipIf(backend.skip)('two worker processes answer; what one writes, the other reads', async () => {
    const workerPids = new Set(listening(server).map((w) => w.pid));
    expect(workerPids.size).toBe(2);
    expect(workerPids.has(server.child.pid as number)).toBe(false);
    const answering = new Set<number>();
    let crossed = 0;
    for (let i = 0; i < 6; i++) {
      const marker = `cluster-${i}-${randomBytes(4).toString('hex')}`;
      const created = await request(
        port,
        'POST',
        '/fhir/R4/Patient',
        token,
        JSON.stringify({ resourceType: 'Patient', name: [{ family: marker }] }),
      );
      expect(created.status).toBe(201);
      const id = (JSON.parse(created.body) as { id: string }).id;
      const read = await request(port, 'GET', `/fhir/R4/Patient/${id}`, token);
      expect(read.status).toBe(200);
      expect(JSON.parse(read.body)).toMatchObject({ id, name: [{ family: marker }] });
      const searched = await request(port, 'GET', `/fhir/R4/Patient?family=${marker}`, token);
      expect(searched.status).toBe(200);
      expect((JSON.parse(searched.body) as { total?: number; entry?: unknown[] }).entry).toHaveLength(1);
      const writer = await answeredBy(server, created.reqId);
      const reader = await answeredBy(server, read.reqId);
      answering
        .add(writer)
        .add(reader)
        .add(await answeredBy(server, searched.reqId));
      if (writer !== reader) crossed++;
    }
    // Both workers answered (and only workers: the primary serves no request), and at least one read was answered by
    // another worker than the one that wrote.
    expect(answering).toEqual(workerPids);
    expect(crossed).toBeGreaterThan(0);
  });

  it.skipIf(backend.skip)('GET /metrics counts the requests of both workers', async () => {
    // The first test read six Patients by id, spread over both workers; every scrape (whichever worker answers it)
    // holds the cluster's sum, gathered by the primary.
    for (let i = 0; i < 3; i++) {
      const res = await request(port, 'GET', '/metrics', METRICS_TOKEN);
      expect(res.status, res.body).toBe(200);
      const reads = res.body
        .split('\n')
        .find(
          (l) =>
            l.startsWith('cinder_http_requests_total{') &&
            l.includes('method="GET"') &&
            l.includes('route="/fhir/R4/:type/:id"') &&
            l.includes('status="200"'),
        );
      expect(Number(reads?.split(' ').pop())).toBe(6);
    }
  });

  it.skipIf(backend.skip)(
    'a worker killed with SIGKILL is restarted; only requests it held fail meanwhile',
    async () => {
      const before = listening(server);
      const victim = before.find((w) => w.slot === 1) as { slot: number; pid: number };
      expect(victim).toBeTruthy();
      const created = await request(
        port,
        'POST',
        '/fhir/R4/Patient',
        token,
        JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Survivor' }] }),
      );
      const id = (JSON.parse(created.body) as { id: string }).id;

      // Four clients read in a loop, each with one request in flight at a time, on a new connection each time.
      let running = true;
      let ok = 0;
      const failures: string[] = [];
      const clients = Array.from({ length: 4 }, async () => {
        while (running) {
          try {
            const r = await request(port, 'GET', `/fhir/R4/Patient/${id}`, token);
            if (r.status === 200) ok++;
            else failures.push(`status ${r.status}`);
          } catch (err) {
            failures.push((err as Error).message);
          }
        }
      });
      await until(() => ok >= 20, 30_000, 'reads before the kill');
      process.kill(victim.pid, 'SIGKILL');
      const okAtKill = ok;
      await until(
        () => listening(server).some((w) => w.slot === 1 && w.pid !== victim.pid),
        120_000,
        'the worker to be restarted',
      );
      const restarted = listening(server).find((w) => w.slot === 1 && w.pid !== victim.pid) as {
        pid: number;
      };
      // The restarted worker answers too.
      await until(
        () =>
          lines(server).some(
            (l) => l.msg === 'request completed' && l.pid === restarted.pid && l.reqId !== undefined,
          ),
        30_000,
        'a request answered by the restarted worker',
      );
      running = false;
      await Promise.all(clients);

      expect(alive(victim.pid)).toBe(false);
      expect(ok).toBeGreaterThan(okAtKill);
      // At most the requests in flight on the killed worker (one per client) failed.
      expect(failures.length).toBeLessThanOrEqual(4);
      const died = lines(server).find((l) => l.msg === 'worker died; restarting') as LogLine & {
        signal?: string;
      };
      expect(died).toMatchObject({ workerSlot: 1, workerPid: victim.pid, signal: 'SIGKILL' });
    },
    180_000,
  );

  it.skipIf(backend.skip)(
    'SIGTERM to the primary stops every worker and exits 0',
    async () => {
      const workers = listening(server)
        .map((w) => w.pid)
        .filter(alive);
      expect(workers).toHaveLength(2);
      server.child.kill('SIGTERM');
      expect(await exited(server.child)).toBe(0);
      for (const pid of workers) expect(alive(pid)).toBe(false);
      const stopped = lines(server).filter((l) => l.msg === 'stopped');
      expect(new Set(stopped.map((l) => l.pid))).toEqual(new Set([...workers, server.child.pid]));
    },
    60_000,
  );
});

describe('WORKERS=2 on PGlite', () => {
  it('is refused at start with a message naming the reason', async () => {
    const { dataDir, configFile } = prepare();
    const server = startServer({
      CINDER_CONFIG: configFile,
      DATA_DIR: dataDir,
      PORT: String(await freePort()),
      WORKERS: '2',
      EMBEDDED_ENGINE: 'pglite',
    });
    expect(await exited(server.child)).toBe(1);
    expect(server.output()).toMatch(/workers > 1 needs PostgreSQL/);
    expect(server.output()).not.toMatch(/starting worker processes/);
    // Nothing was opened: no database in the data directory.
    expect(fs.readdirSync(dataDir)).toEqual(['cinder.json']);
  }, 60_000);
});
