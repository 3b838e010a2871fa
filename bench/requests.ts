// One request of each kind, timed one at a time, against a database a previous `bench/growth.ts` run left
// (`cinder_growth`, or REQUESTS_DATABASE_URL): reads, versions and histories, compartment and `$everything`, searches of
// every parameter type and modifier, sorts, counts, `$csv`, conditional writes and a delete. Each GET runs twice (the
// second with the data it touched in memory); the table lists the slowest first. Requests that read every row of a
// large table stand out by seconds: this is how the unindexed vread, instance history, compartment search and
// `$everything` were found at 5 million Observations.
//
//   npm run build && npx tsx bench/requests.ts
//
// Totals are counted up to the server's searchCountLimit (default 50,000): beyond it `_summary=count` and
// `_total=accurate` answer 400 (the status column shows it) at once rather than reading every match.
//
// REQUESTS_MATCH=<regular expression> runs only the requests whose `METHOD path` matches. The Patient and Observation
// asked about are taken from the middle of the data. The run writes: a conditional
// create and update of a Patient, and the delete of one Observation.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { login, startServer } from './server.js';

const URL_ = process.env.REQUESTS_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/cinder_growth';
/** Only the requests whose `METHOD path` matches this regular expression (default: all). */
const ONLY = new RegExp(process.env.REQUESTS_MATCH ?? '');

type Request = [
  method: 'GET' | 'POST' | 'PUT' | 'DELETE',
  path: string,
  body?: unknown,
  headers?: Record<string, string>,
];

function requests(pid: string, oid: string): Request[] {
  const loinc = 'http://loinc.org|8302-2';
  return [
    ['GET', `Patient/${pid}`],
    ['GET', `Patient/${pid}/_history`],
    ['GET', `Patient/${pid}/_history/1`],
    ['GET', `Observation/${oid}`],
    ['GET', `Observation/${oid}/_history/1`],
    ['GET', `Observation/${oid}/_history`],
    ['GET', 'Observation/_history?_count=10'],
    ['GET', '_history?_count=10'],
    ['GET', `Patient/${pid}/Observation`],
    ['GET', `Patient/${pid}/Observation?code=${loinc}`],
    ['GET', `Patient/${pid}/$everything`],
    ['GET', `Observation?subject=Patient/${pid}&_sort=-date`],
    ['GET', `Observation?patient=${pid}`],
    ['GET', `Observation?subject=${pid}&_include=Observation:subject`],
    ['GET', `Patient?_id=${pid}&_revinclude=Observation:subject`],
    ['GET', 'Patient?identifier=MRN-100005&_revinclude=Observation:patient'],
    ['GET', 'Observation?subject:Patient.identifier=MRN-100005&_count=10'],
    ['GET', 'Observation?subject.family=Smith&_count=10'],
    ['GET', `Patient?_has:Observation:subject:code=${loinc}&_count=10`],
    ['GET', 'Observation?date=ge2020-01-01&_count=10'],
    ['GET', 'Observation?date=2015-03-04&_count=10'],
    ['GET', 'Observation?value-quantity=gt100&_count=10'],
    ['GET', 'Observation?value-quantity=170.5&_count=10'],
    ['GET', `Observation?code-value-quantity=${loinc}$gt180&_count=10`],
    ['GET', `Observation?combo-code=${loinc}&_count=10`],
    ['GET', 'Observation?_lastUpdated=gt2020-01-01&_count=10'],
    ['GET', 'Observation?_count=10'],
    ['GET', 'Observation?_count=10&_sort=-_lastUpdated'],
    ['GET', 'Observation?_sort=date&_count=10'],
    ['GET', 'Observation?_sort=-date&_count=10'],
    ['GET', 'Observation?_sort=-value-quantity&_count=10'],
    ['GET', `Observation?_sort=date&code=${loinc}&_count=10&_offset=500`],
    ['GET', `Observation?_sort=-date&subject=Patient/${pid}&_count=10`],
    ['GET', 'Observation?value-string:missing=false&_count=10'],
    ['GET', 'Observation?date:missing=true&_count=10'],
    ['GET', `Patient?_has:Observation:subject:code=${loinc}&_count=10&_sort=-_lastUpdated`],
    ['GET', 'Patient?_has:Observation:subject:code=http://loinc.org|4548-4&_count=10'],
    ['GET', 'Observation?_total=estimate&_count=10'],
    ['GET', `Observation?code=${loinc}&_total=estimate&_count=1`],
    ['GET', `Observation?subject=Patient/${pid}&_summary=count`],
    ['GET', 'Patient?_summary=count'],
    ['GET', `Observation?_sort=-date&code=${loinc}&_count=10`],
    ['GET', 'Observation?_count=10&_sort=value-quantity'],
    ['GET', 'Observation?code:text=height&_count=10'],
    ['GET', 'Observation?status:not=final&_count=10'],
    ['GET', 'Observation?subject:missing=true&_count=10'],
    ['GET', 'Observation?code=8302-2&_count=10'],
    ['GET', 'Observation?category=vital-signs&_count=10'],
    ['GET', `Observation?_id=${oid}`],
    ['GET', `Observation?_elements=id&_count=1000&code=${loinc}`],
    ['GET', `Observation?code=${loinc}&_count=20&_offset=2000`],
    ['GET', 'Observation?_summary=count'],
    ['GET', `Observation?code=${loinc}&_total=accurate&_count=1`],
    ['GET', `Observation/$csv?_fields=id,code&subject=Patient/${pid}`],
    ['GET', 'Observation/$csv?_fields=id,code'],
    ['GET', 'Patient?name=Smi&_count=10'],
    ['GET', 'Patient?family:contains=mit&_count=10'],
    ['GET', 'Patient?birthdate=ge1980-01-01&_count=10'],
    ['GET', 'Patient?gender=female&_count=10'],
    ['GET', 'Patient?family=Smith&gender=female&_count=10'],
    ['GET', 'Patient?_count=10&_sort=family'],
    ['GET', 'Patient?_count=10&_sort=-birthdate'],
    [
      'POST',
      'Patient',
      { resourceType: 'Patient', identifier: [{ value: 'MRN-100007' }] },
      { 'if-none-exist': 'identifier=MRN-100007' },
    ],
    [
      'PUT',
      'Patient?identifier=MRN-100009',
      { resourceType: 'Patient', identifier: [{ value: 'MRN-100009' }] },
    ],
    ['DELETE', `Observation/${oid}`],
    ['GET', `Observation/${oid}`],
  ];
}

async function main(): Promise<void> {
  const c = new pg.Client({ connectionString: URL_ });
  await c.connect();
  let pid: string;
  let oid: string;
  try {
    const n = await c.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM sp_reference WHERE resource_type = 'Observation' AND code IN ('subject', 'patient')`,
    );
    const ref = await c.query<{ ref: string; id: string }>(
      `SELECT x.ref, r.id FROM sp_reference x JOIN resources r ON r.rid = x.rid
       WHERE x.resource_type = 'Observation' AND x.code IN ('subject', 'patient') AND NOT r.deleted
       ORDER BY x.rid OFFSET $1 LIMIT 1`,
      [Math.floor((n.rows[0]?.n ?? 0) / 2)],
    );
    const row = ref.rows[0];
    if (!row) throw new Error(`no Observations with a subject in ${URL_}: run bench/growth.ts first`);
    pid = row.ref.split('/')[1] as string;
    oid = row.id;
  } finally {
    await c.end();
  }
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-requests-'));
  const stdout = fs.openSync('/dev/null', 'a');
  const server = await startServer(
    { DATABASE_URL: URL_, DATA_DIR: path.join(work, 'files') },
    work,
    { requestLog: 'errors' },
    { stdout },
  );
  const rows: { request: string; status: number; ms: string; best: number }[] = [];
  try {
    const token = await login(server.base);
    for (const [method, p, body, headers] of requests(pid, oid)) {
      if (!ONLY.test(`${method} ${p}`)) continue;
      const times: number[] = [];
      let status = 0;
      for (let i = 0; i < (method === 'GET' ? 2 : 1); i++) {
        const started = performance.now();
        const res = await fetch(`${server.base}fhir/R4/${p}`, {
          method,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json', ...headers },
          ...(body ? { body: JSON.stringify(body) } : {}),
        });
        await res.arrayBuffer();
        status = res.status;
        times.push(Math.round(performance.now() - started));
      }
      const request = `${method} ${p.replaceAll(pid, '{patient}').replaceAll(oid, '{observation}')}`;
      rows.push({ request, status, ms: times.join(' / '), best: Math.min(...times) });
    }
  } finally {
    await server.stop();
    fs.closeSync(stdout);
    fs.rmSync(work, { recursive: true, force: true });
  }
  console.log(
    `one request at a time against ${new URL(URL_).pathname.slice(1)}; ms of each run, slowest first`,
  );
  console.table(rows.sort((a, b) => b.best - a.best).map(({ best: _, ...r }) => r));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
