// The resource types and search parameters the server supports, read once from its CapabilityStatement
// (GET {fhir}/metadata), for the CSV builder and the resource browser.
import type { Api } from './api.js';

export interface TypeInfo {
  type: string;
  searchParams: { name: string; type: string }[];
}

interface CapabilityStatement {
  rest?: { resource?: { type: string; searchParam?: { name: string; type: string }[] }[] }[];
}

let cached: Promise<TypeInfo[]> | undefined;

/** Types sorted by name, each with its own search parameters sorted by name. */
export function typesOf(cs: CapabilityStatement): TypeInfo[] {
  return (cs.rest?.[0]?.resource ?? [])
    .map((r) => ({
      type: r.type,
      searchParams: [...(r.searchParam ?? [])].sort((a, b) => a.name.localeCompare(b.name)),
    }))
    .sort((a, b) => a.type.localeCompare(b.type));
}

export function loadTypes(api: Api): Promise<TypeInfo[]> {
  cached ??= api.request<CapabilityStatement>('metadata').then((r) => typesOf(r.body));
  cached.catch(() => {
    cached = undefined;
  });
  return cached;
}
