// One export file's download timed with and without gzip (issue 30 point 7: why the soak's downloads take seconds),
// on PostgreSQL: DL_PATIENTS (default 25,000) Patients, one export of them, then DL_ROUNDS (default 3) rounds of a
// gzip download and a plain one, each read whole by the client. The server is otherwise idle, so the times are what
// reading the file's chunks from the database, (compressing,) sending and receiving cost; the soak adds waiting for
// pooled connections behind other requests. DL_MAIN: another build to time (default dist/main.js).
//
//   npm run build && npx tsx bench/export-download.ts
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makePatient } from './patients.js';
import { batch, dropDatabase, freshDatabase, login, startServer } from './server.js';

const PATIENTS = Number(process.env.DL_PATIENTS ?? 25_000);
const ROUNDS = Number(process.env.DL_ROUNDS ?? 3);
const DB = 'cinder_export_download';

async function main(): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-export-download-'));
  const url = await freshDatabase(DB);
  const server = await startServer(
    { DATABASE_URL: url, DATA_DIR: path.join(work, 'data') },
    work,
    {},
    {
      ...(process.env.DL_MAIN ? { main: process.env.DL_MAIN } : {}),
    },
  );
  try {
    const token = await login(server.base);
    for (let i = 0; i < PATIENTS; i += 1000)
      await batch(
        server.base,
        token,
        Array.from({ length: Math.min(1000, PATIENTS - i) }, (_, k) => makePatient(i + k)),
      );
    const auth = { authorization: `Bearer ${token}` };
    const kick = await fetch(`${server.base}fhir/R4/Patient/$export?_type=Patient`, {
      headers: { ...auth, accept: 'application/fhir+json', prefer: 'respond-async' },
    });
    if (kick.status !== 202) throw new Error(`kick-off: ${kick.status} ${await kick.text()}`);
    const status = kick.headers.get('content-location') as string;
    let file: string | undefined;
    while (!file) {
      const res = await fetch(status, { headers: { ...auth, accept: 'application/json' } });
      if (res.status === 200) file = ((await res.json()) as { output: { url: string }[] }).output[0]?.url;
      else await res.text();
      await new Promise((r) => setTimeout(r, 300));
    }
    const rows: Record<string, string | number>[] = [];
    for (let round = 0; round < ROUNDS; round++)
      for (const encoding of ['gzip', 'identity']) {
        const started = performance.now();
        const res = await fetch(file, { headers: { ...auth, 'accept-encoding': encoding } });
        const bytes = (await res.arrayBuffer()).byteLength;
        rows.push({
          round: round + 1,
          'accept-encoding': encoding,
          'content-encoding': res.headers.get('content-encoding') ?? '-',
          MB: Number((bytes / 1048576).toFixed(1)),
          ms: Math.round(performance.now() - started),
        });
      }
    console.log(
      `One export file of ${PATIENTS} Patients, downloaded whole (${os.loadavg()[0]?.toFixed(1)} load):`,
    );
    console.table(rows);
  } finally {
    await server.stop();
    await dropDatabase(DB);
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
