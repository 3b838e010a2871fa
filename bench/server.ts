// Starts a built Cinder server as its own process (so its RSS is its own) and stops it.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { freePort } from '../test/support/server-process.js';

export const ADMIN = { clientId: 'bench-admin', clientSecret: 'bench-admin-secret-0123456789' };

/** The PostgreSQL on which benches make their own databases (BENCH_DATABASE_URL). */
const ADMIN_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

async function adminSql(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** Creates database `name` anew (a previous run's is dropped first); answers its URL. */
export async function freshDatabase(name: string): Promise<string> {
  await dropDatabase(name);
  await adminSql(`CREATE DATABASE ${name}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

export const dropDatabase = (name: string): Promise<void> =>
  adminSql(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);

export interface RunningServer {
  base: string;
  pid: number;
  child: ChildProcess;
  /** Seconds from spawn to the first healthy /healthcheck. */
  startSeconds: number;
  /** Memory now of the server process and its children (the embedded PostgreSQL), as PSS in MB. */
  treeMb(): number;
  /** Highest resident memory (VmHWM) of the server process itself in MB. */
  peakRssMb(): number;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** The built entry point to run (default `dist/main.js` of this checkout), e.g. another checkout's build. */
  main?: string;
  /** Where the server's stdout (its log lines) goes: inherited (default), or a file descriptor (e.g. /dev/null). */
  stdout?: 'inherit' | number;
  /** Extra arguments for node before the script (e.g. `--cpu-prof`). */
  nodeArgs?: string[];
}

/** Node's flags in `npm start` (package.json), so that the server runs here as it runs for its users. */
function startFlags(): string[] {
  const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8')) as { scripts: { start: string } };
  return pkg.scripts.start.split(/\s+/).filter((w) => w.startsWith('--'));
}

export async function startServer(
  env: Record<string, string>,
  workDir: string,
  extraConfig: Record<string, unknown> = {},
  opts: StartOptions = {},
): Promise<RunningServer> {
  const port = await freePort();
  const configFile = path.join(workDir, 'cinder.json');
  fs.writeFileSync(configFile, JSON.stringify({ admin: ADMIN, logLevel: 'warn', ...extraConfig }));
  const main = path.resolve(opts.main ?? 'dist/main.js');
  const spawned = performance.now();
  const child = spawn(process.execPath, [...startFlags(), ...(opts.nodeArgs ?? []), main], {
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', CINDER_CONFIG: configFile },
    stdio: ['ignore', opts.stdout ?? 'inherit', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}/`;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${base}healthcheck`)).ok) break;
    } catch {
      // not yet listening
    }
    if (performance.now() - spawned > 120_000) throw new Error('server did not start');
    await new Promise((r) => setTimeout(r, 20));
  }
  const startSeconds = (performance.now() - spawned) / 1000;
  return {
    base,
    pid: child.pid as number,
    child,
    startSeconds,
    treeMb: () => treePssMb(child.pid as number),
    peakRssMb() {
      const status = fs.readFileSync(`/proc/${child.pid}/status`, 'utf8');
      const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
      return Math.round(kb / 1024);
    },
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r(null) : child.on('exit', r)));
    },
  };
}

/**
 * Memory of a process and its descendants (the embedded PostgreSQL's processes are Cinder's children) in MB, as
 * PSS: pages shared between processes (PostgreSQL's shared buffers) are divided among them instead of counted in
 * each one's RSS.
 */
function treePssMb(pid: number): number {
  let kb = 0;
  const visit = (p: number): void => {
    try {
      const rollup = fs.readFileSync(`/proc/${p}/smaps_rollup`, 'utf8');
      kb += Number(/\nPss:\s+(\d+)/.exec(rollup)?.[1] ?? 0);
      const children = fs.readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim();
      for (const c of children ? children.split(/\s+/) : []) visit(Number(c));
    } catch {
      // gone
    }
  };
  visit(pid);
  return Math.round(kb / 1024);
}

export async function login(base: string): Promise<string> {
  const res = await fetch(`${base}oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: ADMIN.clientId,
      client_secret: ADMIN.clientSecret,
    }),
  });
  if (!res.ok) throw new Error(`login failed ${res.status}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

/** Creates `resources` with one batch Bundle; the new ids, in order (any entry that fails throws). */
export async function batch(
  base: string,
  token: string,
  resources: Record<string, unknown>[],
): Promise<string[]> {
  const entry = resources.map((resource) => ({
    resource,
    request: { method: 'POST', url: resource.resourceType as string },
  }));
  const res = await fetch(`${base}fhir/R4`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
    body: JSON.stringify({ resourceType: 'Bundle', type: 'batch', entry }),
  });
  if (!res.ok) throw new Error(`batch failed ${res.status} ${(await res.text()).slice(0, 300)}`);
  const body = (await res.json()) as { entry: { response: { status: string; location: string } }[] };
  return body.entry.map((e) => {
    if (!e.response.status.startsWith('201')) throw new Error(`entry failed: ${JSON.stringify(e.response)}`);
    return e.response.location.split('/')[1] as string;
  });
}

/** A LOINC coding of a quantity the benches load: code, display, UCUM unit and a typical value. */
export type QuantityCode = readonly [code: string, display: string, unit: string, base: number];

/** A final Observation of `patientId` with a quantity near the code's typical value (`base × factor`). */
export function quantityObservation(o: {
  patientId: string;
  coding: QuantityCode;
  category: string;
  categoryDisplay?: string;
  effective: string;
  issued?: string;
  factor: number;
}): Record<string, unknown> {
  const [code, display, unit, base] = o.coding;
  return {
    resourceType: 'Observation',
    status: 'final',
    category: [
      {
        coding: [
          {
            system: 'http://terminology.hl7.org/CodeSystem/observation-category',
            code: o.category,
            ...(o.categoryDisplay ? { display: o.categoryDisplay } : {}),
          },
        ],
      },
    ],
    code: { coding: [{ system: 'http://loinc.org', code, display }], text: display },
    subject: { reference: `Patient/${o.patientId}` },
    effectiveDateTime: o.effective,
    ...(o.issued ? { issued: o.issued } : {}),
    valueQuantity: {
      value: Math.round(base * o.factor * 10) / 10,
      unit,
      system: 'http://unitsofmeasure.org',
      code: unit,
    },
  };
}
