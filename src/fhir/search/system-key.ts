// How the search index stores a code system URI (sp_token, sp_identifier and sp_quantity `system`, sp_identifier
// `type_system`; migration 027): a well-known prefix is replaced by one control character, which no URI holds
// (RFC 3986 allows none), so `http://loinc.org` takes 1 byte and `http://terminology.hl7.org/CodeSystem/v3-ActCode`
// 11. Equal URIs give equal keys and different ones different keys, so every `system =` test gives the answer it
// gave on the URI; nothing reads the key back. The list is part of the stored format: entries are never changed or
// reordered, only appended (a new entry needs a migration that re-encodes the rows it matches).
// https://hl7.org/fhir/R4/search.html#token

/** The prefixes, the first match wins (a longer prefix comes before a shorter one it starts with). Key: index + 1. */
export const SYSTEM_PREFIXES: readonly string[] = [
  'http://terminology.hl7.org/CodeSystem/',
  'http://hl7.org/fhir/sid/',
  'http://hl7.org/fhir/',
  'http://loinc.org',
  'http://snomed.info/sct',
  'http://unitsofmeasure.org',
  'http://www.nlm.nih.gov/research/umls/rxnorm',
  'urn:oid:',
  'urn:ietf:',
  'urn:iso:std:iso:',
  'https://',
  'http://',
];

/** Marks a text that starts with a control character itself (kept whole after it), so that keys stay distinct. */
const ESCAPE = '\u001f';

/** The stored form of a code system URI (null stays null). */
export function systemKey(system: string): string;
export function systemKey(system: string | null): string | null;
export function systemKey(system: string | null): string | null {
  if (system === null) return null;
  if (system.charCodeAt(0) < 0x20) return ESCAPE + system;
  for (let i = 0; i < SYSTEM_PREFIXES.length; i++) {
    const p = SYSTEM_PREFIXES[i] as string;
    if (system.startsWith(p)) return String.fromCharCode(i + 1) + system.slice(p.length);
  }
  return system;
}
