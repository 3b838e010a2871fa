// $viewdefinition-export on PostgreSQL (issue 15): three views over the BENCH_EXPORT_PATIENTS Patients (100,000 by
// default) in one job, NDJSON and Parquet, timed from kick-off to `completed`: rows/s, Patients read per second (each
// view reads every Patient once) and its ratio to the plain `$export` of the same Patients measured in the same run,
// and the server's peak RSS.
import { EXPORT_PATIENTS, ensurePatients, timedExport } from './export.js';
import type { RunningServer } from './server.js';

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

const VIEWS = [
  {
    resourceType: 'ViewDefinition',
    name: 'patients',
    resource: 'Patient',
    select: [
      {
        column: [
          { name: 'id', path: 'getResourceKey()', type: 'id' },
          { name: 'family', path: 'name.first().family', type: 'string' },
          { name: 'birth_date', path: 'birthDate', type: 'date' },
          { name: 'gender', path: 'gender', type: 'code' },
        ],
      },
    ],
  },
  {
    resourceType: 'ViewDefinition',
    name: 'patient_names',
    resource: 'Patient',
    select: [
      { column: [{ name: 'id', path: 'getResourceKey()' }] },
      { forEach: 'name.given', column: [{ name: 'given', path: '$this', type: 'string' }] },
    ],
  },
  {
    resourceType: 'ViewDefinition',
    name: 'patient_telecom',
    resource: 'Patient',
    select: [
      { column: [{ name: 'id', path: 'getResourceKey()' }] },
      {
        forEach: 'telecom',
        column: [
          { name: 'system', path: 'system', type: 'code' },
          { name: 'value', path: 'value', type: 'string' },
        ],
      },
    ],
  },
];

async function kickOff(base: string, token: string, format: string): Promise<string> {
  const res = await fetch(`${base}fhir/R4/$viewdefinition-export`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      prefer: 'respond-async',
      'content-type': 'application/fhir+json',
    },
    body: JSON.stringify({
      resourceType: 'Parameters',
      parameter: [
        { name: '_format', valueCode: format },
        ...VIEWS.map((v) => ({ name: 'view', part: [{ name: 'viewResource', resource: v }] })),
      ],
    }),
  });
  if (res.status !== 202) throw new Error(`view export kick-off failed ${res.status} ${await res.text()}`);
  return res.headers.get('content-location') as string;
}

export async function benchViewExport(
  server: RunningServer,
  token: string,
  runs: number,
  notes: string[],
): Promise<void> {
  const patients = await ensurePatients(server.base, token, EXPORT_PATIENTS);
  const baseline = [];
  for (let i = 0; i < runs; i++) baseline.push(await timedExport(server, token, '_type=Patient'));
  const baseRate = median(baseline.map((e) => e.resources / e.seconds));
  for (const format of ['ndjson', 'parquet']) {
    const done = [];
    for (let i = 0; i < runs; i++)
      done.push(await timedExport(server, token, () => kickOff(server.base, token, format)));
    const seconds = median(done.map((d) => d.seconds));
    // NDJSON rows are counted from the files; a Parquet file is not lines, so its rows are the NDJSON run's.
    const rows = format === 'ndjson' ? (done[0]?.resources ?? 0) : undefined;
    const reads = (patients * VIEWS.length) / seconds;
    notes.push(
      `postgres: $viewdefinition-export of ${VIEWS.length} views over ${patients} Patients as ${format}: median ${seconds.toFixed(2)} s ` +
        `(${done.map((e) => e.seconds.toFixed(2)).join(', ')} s)${rows !== undefined ? `, ${Math.round(rows / seconds)} rows/s (${rows} rows)` : ''}, ` +
        `${Math.round(reads)} Patients read/s = ${(reads / baseRate).toFixed(2)}x the $export of the same Patients ` +
        `(${Math.round(baseRate)} resources/s in this run), peak server RSS ${Math.max(...done.map((e) => e.peakRssMb))} MB`,
    );
  }
}
