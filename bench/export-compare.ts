// Bulk export and its download, compared between builds in one sitting: each build of EXPORT_TARGETS (default
// `this=dist/main.js`; e.g. `base=/tmp/base/dist/main.js,this=dist/main.js` with a `git worktree` of main built at
// /tmp/base) serves the same database of BENCH_EXPORT_PATIENTS Patients (100,000 by default, loaded once) in turn,
// EXPORT_ROUNDS times (default 2): `$export?_type=Patient` timed to `completed` with the server's peak RSS, then its
// file downloaded by 4 clients at once, 3 times (MB/s in all, server peak RSS). The database is dropped at the end.
//
//   npm run build && npx tsx bench/export-compare.ts
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { concurrentDownloads, ensurePatients, EXPORT_PATIENTS, timedExport } from './export.js';
import { dropDatabase, freshDatabase, login, startServer } from './server.js';

const TARGETS = (process.env.EXPORT_TARGETS ?? 'this=dist/main.js').split(',').map((t) => t.split('='));
const ROUNDS = Number(process.env.EXPORT_ROUNDS ?? 2);
const DB = 'cinder_export_compare';

async function main(): Promise<void> {
  const url = await freshDatabase(DB);
  const rows: Record<string, string | number>[] = [];
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      for (const [name, main] of TARGETS) {
        const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-export-compare-'));
        const server = await startServer(
          { DATABASE_URL: url, DATA_DIR: path.join(work, 'data') },
          work,
          {},
          { main: main as string, stdout: fs.openSync('/dev/null', 'w') },
        );
        try {
          const token = await login(server.base);
          await ensurePatients(server.base, token, EXPORT_PATIENTS);
          const e = await timedExport(server, token, '_type=Patient');
          const urls = e.output.map((o) => o.url);
          const downloads = [];
          for (let i = 0; i < 3; i++) downloads.push(await concurrentDownloads(server, token, urls));
          rows.push({
            build: name as string,
            round,
            'export s': Number(e.seconds.toFixed(2)),
            'export peak RSS MB': e.peakRssMb,
            'download MB/s': downloads.map((d) => Math.round(d.mb / d.seconds)).join(' / '),
            'download peak RSS MB': downloads.map((d) => d.peakRssMb).join(' / '),
          });
        } finally {
          await server.stop();
          fs.rmSync(work, { recursive: true, force: true });
        }
      }
    }
  } finally {
    await dropDatabase(DB);
  }
  console.log(
    `\n$export of ${EXPORT_PATIENTS} Patients, then its file downloaded by 4 clients at once (3 times):`,
  );
  console.table(rows);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
