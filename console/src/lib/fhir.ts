// Small readers of FHIR JSON for the console's tables: Bundle entries and paging links, and a display name.

export interface Resource {
  resourceType: string;
  id?: string;
  meta?: { versionId?: string; lastUpdated?: string; project?: string };
  [key: string]: unknown;
}

export interface Bundle<T extends Resource = Resource> {
  resourceType: 'Bundle';
  total?: number;
  link?: { relation: string; url: string }[];
  entry?: { fullUrl?: string; resource?: T; search?: { mode?: string } }[];
}

/** The resources of a Bundle, only the search matches when `matchesOnly` (not `_include`d ones). */
export function entries<T extends Resource = Resource>(b: Bundle<T> | undefined, matchesOnly = false): T[] {
  return (b?.entry ?? [])
    .filter((e) => !matchesOnly || e.search?.mode !== 'include')
    .map((e) => e.resource)
    .filter((r): r is T => r !== undefined);
}

export const linkOf = (b: Bundle | undefined, relation: string): string | undefined =>
  b?.link?.find((l) => l.relation === relation)?.url;

interface HumanName {
  text?: string;
  given?: string[];
  family?: string;
  prefix?: string[];
}

/** A person's or thing's name: the first HumanName, else a string `name`, else `Type/id`. */
export function displayName(r: Resource | undefined): string {
  if (!r) return '';
  const name = r.name;
  if (typeof name === 'string') return name;
  if (Array.isArray(name) && name[0]) {
    const n = name[0] as HumanName;
    const parts = [...(n.given ?? []), n.family ?? ''].join(' ').trim();
    if (n.text ?? parts) return n.text ?? parts;
  }
  return `${r.resourceType}/${r.id ?? ''}`;
}

/** The `Type/id` of a reference's `reference`, or `''`. */
export const refOf = (ref: unknown): string =>
  typeof (ref as { reference?: unknown })?.reference === 'string'
    ? (ref as { reference: string }).reference
    : '';

/** A date-time for people: local date and time to the second, or `—`. */
export function when(instant: string | undefined): string {
  if (!instant) return '—';
  const d = new Date(instant);
  return Number.isNaN(d.getTime()) ? instant : d.toLocaleString(undefined, { hour12: false });
}
