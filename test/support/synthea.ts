// Synthea transaction Bundles for tests: the small fixture in the repository (test/fixtures/synthea-r4, see its
// README), so a fresh clone needs nothing beside it.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';

export const SYNTHEA_FIXTURE_DIR = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '../fixtures/synthea-r4',
);

export interface SyntheaBundle {
  file: string;
  bundle: {
    resourceType: 'Bundle';
    type: string;
    entry: { fullUrl: string; resource: Record<string, unknown> }[];
  };
}

/** Every `*.json.gz` Bundle of `dir`, sorted by file name. */
export function readSyntheaBundles(dir = SYNTHEA_FIXTURE_DIR): SyntheaBundle[] {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.json.gz'))
    .sort()
    .map((file) => ({
      file,
      bundle: JSON.parse(
        zlib.gunzipSync(fs.readFileSync(path.join(dir, file))).toString('utf8'),
      ) as SyntheaBundle['bundle'],
    }));
}
