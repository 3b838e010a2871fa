// Terminology (API.md §9) on PostgreSQL, through HTTP: ValueSet/$expand of a stored 10,000-concept value set (a
// CodeSystem of 10,000 concepts in a three-level hierarchy, 10 × 10 × 100, and a ValueSet including all of it) — the
// first expansion after each new version of the CodeSystem (read, compiled and expanded anew) and repeated ones
// (cached, checked by identity) — `$expand` of `is-a` a second-level concept with `count=20`, and
// ValueSet/$validate-code. Medians in ms. Goal: a repeated 10,000-code expansion in at most 50 ms.
// Run alone with `npx tsx bench/terminology.ts` (after `npm run build`), or as part of `npm run bench`
// (BENCH_TERMINOLOGY=0 skips it).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dropDatabase, freshDatabase, login, startServer } from './server.js';

const CS = 'http://bench.example/cs/10k';
const VS = 'http://bench.example/vs/10k';
const VS_BRANCH = 'http://bench.example/vs/branch';
const REPEATS = Number(process.env.TERMINOLOGY_REPEATS ?? 50);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

/** 10 roots, each with 10 children, each with 99 (or, for the last 10, 98) leaves: 10,000 concepts in all. */
function codeSystem(version: number): Record<string, unknown> {
  const concept = [];
  for (let a = 0; a < 10; a++) {
    const mid = [];
    for (let b = 0; b < 10; b++) {
      const leaves = [];
      for (let c = 0; c < (a * 10 + b < 90 ? 99 : 98); c++)
        leaves.push({ code: `c${a}-${b}-${c}`, display: `Concept ${a} ${b} ${c}` });
      mid.push({ code: `c${a}-${b}`, display: `Group ${a} ${b}`, concept: leaves });
    }
    concept.push({ code: `c${a}`, display: `Root ${a}`, concept: mid });
  }
  return {
    resourceType: 'CodeSystem',
    id: 'bench-10k',
    url: CS,
    version: String(version),
    status: 'active',
    content: 'complete',
    concept,
  };
}

async function timed(
  base: string,
  token: string,
  url: string,
): Promise<{ ms: number; body: Record<string, unknown> }> {
  const started = performance.now();
  const res = await fetch(`${base}fhir/R4/${url}`, { headers: { authorization: `Bearer ${token}` } });
  const body = (await res.json()) as Record<string, unknown>;
  const ms = performance.now() - started;
  if (!res.ok) throw new Error(`${url}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  return { ms, body };
}

async function put(base: string, token: string, resource: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${base}fhir/R4/${String(resource.resourceType)}/${String(resource.id)}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
    body: JSON.stringify(resource),
  });
  if (!res.ok)
    throw new Error(`PUT ${String(resource.id)}: ${res.status} ${(await res.text()).slice(0, 300)}`);
}

export async function benchTerminology(runs: number, notes: string[]): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-bench-tx-'));
  fs.chmodSync(work, 0o755);
  const db = 'cinder_bench_tx';
  const url = await freshDatabase(db);
  const server = await startServer({ DATABASE_URL: url, DATA_DIR: path.join(work, 'files') }, work);
  try {
    const token = await login(server.base);
    const include = (filter?: unknown) => ({
      include: [{ system: CS, ...(filter ? { filter: [filter] } : {}) }],
    });
    await put(server.base, token, {
      resourceType: 'ValueSet',
      id: 'bench-10k',
      url: VS,
      status: 'active',
      compose: include(),
    });
    await put(server.base, token, {
      resourceType: 'ValueSet',
      id: 'bench-branch',
      url: VS_BRANCH,
      status: 'active',
      compose: include({ property: 'concept', op: 'is-a', value: 'c3-4' }),
    });
    const expandAll = `ValueSet/$expand?url=${encodeURIComponent(VS)}`;
    const first: number[] = [];
    const repeated: number[] = [];
    const branch: number[] = [];
    const validate: number[] = [];
    for (let r = 0; r < Math.max(runs, 5); r++) {
      await put(server.base, token, codeSystem(r + 1)); // a new version: nothing cached applies
      const cold = await timed(server.base, token, expandAll);
      if ((cold.body.expansion as { total: number }).total !== 10_000)
        throw new Error('expected 10,000 codes');
      first.push(cold.ms);
      for (let k = 0; k < REPEATS; k++) repeated.push((await timed(server.base, token, expandAll)).ms);
      for (let k = 0; k < REPEATS; k++)
        branch.push(
          (await timed(server.base, token, `ValueSet/$expand?url=${encodeURIComponent(VS_BRANCH)}&count=20`))
            .ms,
        );
      for (let k = 0; k < REPEATS; k++) {
        const code = `c${k % 10}-${k % 7}-${k % 90}`;
        validate.push(
          (
            await timed(
              server.base,
              token,
              `ValueSet/$validate-code?url=${encodeURIComponent(VS)}&system=${encodeURIComponent(CS)}&code=${code}`,
            )
          ).ms,
        );
      }
    }
    const f = (xs: number[]): string => `${median(xs).toFixed(1)} ms`;
    notes.push(
      `terminology: $expand of a stored 10,000-concept ValueSet (all 10,000 codes in the answer): first after a new ` +
        `CodeSystem version ${f(first)} (median of ${first.length}), repeated ${f(repeated)} (median of ${repeated.length}); ` +
        `$expand is-a a 99-concept branch, count=20, ${f(branch)}; $validate-code ${f(validate)} (PostgreSQL, sequential requests)`,
    );
  } finally {
    await server.stop();
    await dropDatabase(db).catch(() => undefined);
    fs.rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url.endsWith(path.basename(process.argv[1]))) {
  const notes: string[] = [];
  benchTerminology(Number(process.env.BENCH_RUNS ?? 3), notes)
    .then(() => notes.forEach((n) => console.log(`- ${n}`)))
    .catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
}
