// Validation against profiles (issue 27, API.md §9): 1. in process, after warm-up, the median µs to validate the US Core
// 5.0.1 example Patient and blood-pressure (vital-signs) Observation against their profiles; 2. through HTTP (loopback,
// embedded PGlite), the seconds to POST a transaction Bundle of 100 Patients, each with a vital-signs Observation, all
// declaring US Core profiles, beside the same Bundle without meta.profile in the same run (interleaved, medians).
// Bindings are checked against the shared R4 value sets by the terminology engine, as in a deployment.
// Run alone with `npx tsx bench/validation.ts`, or as part of `npm run bench` (BENCH_VALIDATION=0 skips it).
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { buildApp } from '../src/app.js';
import { ensureSuperAdmin } from '../src/auth/bootstrap.js';
import { loadKeyRing } from '../src/auth/keys.js';
import { parseConfig } from '../src/config/config.js';
import { createProfileValidator } from '../src/fhir/conformance/profile/index.js';
import { createResolver } from '../src/fhir/conformance/resolver.js';
import { createSharedSet, type SharedIndex } from '../src/fhir/conformance/shared-set.js';
import { createTerminology } from '../src/fhir/conformance/terminology/index.js';
import type { Resource } from '../src/fhir/types.js';
import { createMemoryCache } from '../src/storage/cache/index.js';
import { migrate } from '../src/storage/migrate.js';
import { openPglite } from '../src/storage/pglite.js';
import { localSignals } from '../src/storage/signals.js';
import { writePackageFolder } from '../test/support/fhir-package.js';

const US = 'http://hl7.org/fhir/us/core/StructureDefinition/';
const RUNS = Number(process.env.BENCH_VALIDATION_RUNS ?? 5);
const ITERATIONS = 2_000;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const fixture = (name: string): Resource =>
  JSON.parse(
    fs.readFileSync(new URL(`../test/fixtures/us-core/${name}`, import.meta.url), 'utf8'),
  ) as Resource;

/**
 * The shared set as a deployment has it: the R4 base (its value sets and code systems check the bindings) and US Core
 * 5.0.1's StructureDefinitions as a package folder named in `packages`.
 */
async function sharedWithUsCore(): Promise<{ shared: SharedIndex; packages: string[] }> {
  const packages = [writePackageFolder()];
  const shared = createSharedSet({ packages });
  await shared.ready();
  return { shared, packages };
}

async function inProcess(shared: SharedIndex): Promise<Record<string, number>> {
  // Only the shared set is consulted (projectId null): no database.
  const resolver = createResolver(null as never, shared);
  const v = createProfileValidator({ resolver, terminology: createTerminology({ resolver }) });
  const cases: [string, Resource, string][] = [
    ['US Core Patient', fixture('patient-example.json'), `${US}us-core-patient`],
    ['US Core blood pressure', fixture('blood-pressure.json'), `${US}us-core-blood-pressure`],
  ];
  const out: Record<string, number> = {};
  for (const [name, resource, canonical] of cases) {
    const asked = [{ canonical, explicit: false }];
    for (let i = 0; i < 500; i++) await v.validate({ projectId: null }, resource, asked);
    const times: number[] = [];
    for (let i = 0; i < ITERATIONS; i++) {
      const t0 = performance.now();
      await v.validate({ projectId: null }, resource, asked);
      times.push((performance.now() - t0) * 1000);
    }
    out[name] = Math.round(median(times));
  }
  return out;
}

function bundle(withProfiles: boolean): unknown {
  const patient = fixture('patient-example.json');
  const bp = fixture('blood-pressure.json');
  const entry = [];
  for (let i = 0; i < 100; i++) {
    const p = structuredClone(patient) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    const o = structuredClone(bp) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    delete p.id;
    delete o.id;
    p.identifier[0].value = `bench-${i}`;
    p.meta = withProfiles ? { profile: [`${US}us-core-patient`] } : {};
    o.meta = withProfiles ? { profile: [`${US}us-core-blood-pressure`] } : {};
    o.subject = { reference: `urn:uuid:p${i}` };
    entry.push({ fullUrl: `urn:uuid:p${i}`, resource: p, request: { method: 'POST', url: 'Patient' } });
    entry.push({ resource: o, request: { method: 'POST', url: 'Observation' } });
  }
  return { resourceType: 'Bundle', type: 'transaction', entry };
}

async function overHttp(packages: string[]): Promise<{ withProfiles: number; without: number }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-bench-validation-'));
  const db = await openPglite(null);
  await migrate(db);
  const config = parseConfig({
    baseUrl: 'http://127.0.0.1/',
    dataDir,
    admin: {
      email: 'a@example.com',
      password: 'bench-password-1',
      clientId: 'bench',
      clientSecret: 'bench-secret-0123456789',
    },
    logLevel: 'silent',
    packages,
  });
  await ensureSuperAdmin(
    db,
    { clock: () => new Date(), newId: randomUUID, fhirBase: `${config.baseUrl}fhir/R4` },
    config.admin,
  );
  const app = await buildApp({
    config,
    db,
    keys: await loadKeyRing(db),
    signals: localSignals(),
    cache: createMemoryCache({ max: 1000, clock: () => Date.now() }),
  });
  try {
    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const login = await fetch(`${base}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials&client_id=bench&client_secret=bench-secret-0123456789',
    });
    const token = ((await login.json()) as { access_token: string }).access_token;
    const post = async (body: unknown): Promise<number> => {
      const t0 = performance.now();
      const res = await fetch(`${base}/fhir/R4`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
        body: JSON.stringify(body),
      });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`transaction failed ${res.status} ${text.slice(0, 500)}`);
      return (performance.now() - t0) / 1000;
    };
    const withP = bundle(true);
    const without = bundle(false);
    await post(withP);
    await post(without);
    const a: number[] = [];
    const b: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      a.push(await post(withP));
      b.push(await post(without));
    }
    return { withProfiles: median(a), without: median(b) };
  } finally {
    await app.close();
    await db.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function benchValidation(): Promise<void> {
  const { shared, packages } = await sharedWithUsCore();
  const micro = await inProcess(shared);
  for (const [name, us] of Object.entries(micro))
    console.log(`validation in process: ${name}: median ${us} µs`);
  const http = await overHttp(packages);
  console.log(
    `transaction of 100 Patients + 100 vital-signs Observations over HTTP (PGlite): with US Core meta.profile ` +
      `${http.withProfiles.toFixed(2)} s, without ${http.without.toFixed(2)} s (ratio ${(http.withProfiles / http.without).toFixed(2)})`,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  benchValidation().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
