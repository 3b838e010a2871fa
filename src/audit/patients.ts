// The patients whose data an answer or a written resource holds (BALP's patient entity, API.md §10): every Patient a
// resource is or refers to. Read from the JSON text without parsing it (an answer is scanned once, after it is sent),
// or from a resource object by walking it (a written version).

/** Most patient entities one AuditEvent names (a page of 1000 resources about 1000 patients names them all). */
export const MAX_PATIENTS = 1000;

const ID = '[A-Za-z0-9\\-.]{1,64}';
// `"reference": "Patient/1"`, also absolute or versioned; a search's or history's `"fullUrl": ".../Patient/1"`.
const REFERENCE = new RegExp(
  `"reference"\\s*:\\s*"(?:[^"\\\\]*/)?Patient/(${ID})(?:/_history/[^"\\\\]*)?"`,
  'g',
);
const FULL_URL = new RegExp(`"fullUrl"\\s*:\\s*"[^"\\\\]*/Patient/(${ID})"`, 'g');
const HOLDS_PATIENT = /"resourceType"\s*:\s*"Patient"/;

function scan(re: RegExp, text: string, into: Set<string>): void {
  re.lastIndex = 0;
  for (let m = re.exec(text); m && into.size < MAX_PATIENTS; m = re.exec(text)) into.add(`Patient/${m[1]}`);
}

/**
 * `Patient/<id>` of each patient `text` (FHIR JSON: a resource, a Bundle, Parameters) holds data of: every Patient it
 * refers to, and the Patients a searchset or history Bundle holds (by their `fullUrl`), read from the text without
 * parsing it. A Patient read by id is known from its URL. Only `parse` (a batch or transaction answer, whose entries
 * have no fullUrl) parses the text to find the Patient resources in it.
 */
export function patientsInJson(text: string, into: Set<string> = new Set(), parse = false): Set<string> {
  if (!text.includes('Patient')) return into;
  if (parse && HOLDS_PATIENT.test(text)) {
    try {
      walk(JSON.parse(text), into, 0);
      return into;
    } catch {
      // Not JSON after all: the references in the text are still read below.
    }
  }
  scan(REFERENCE, text, into);
  scan(FULL_URL, text, into);
  return into;
}

/** The patients a written version is about: itself when it is a Patient, and every Patient it refers to. */
export function patientsOfResource(resourceType: string, id: string, resource: unknown): string[] {
  const out = new Set<string>();
  if (resourceType === 'Patient') out.add(`Patient/${id}`);
  if (typeof resource === 'string') patientsInJson(resource, out);
  else if (resource && typeof resource === 'object') walk(resource, out, 0);
  return [...out];
}

const RAW_ID = new RegExp(`^${ID}$`);
const REF = new RegExp(`^(?:.*/)?Patient/(${ID})(?:/_history/.*)?$`);

function walk(value: unknown, out: Set<string>, depth: number): void {
  if (depth > 64 || out.size >= MAX_PATIENTS) return;
  if (Array.isArray(value)) {
    for (const v of value) walk(v, out, depth + 1);
    return;
  }
  if (!value || typeof value !== 'object') return;
  const r = value as { resourceType?: unknown; id?: unknown };
  if (r.resourceType === 'Patient' && typeof r.id === 'string' && RAW_ID.test(r.id))
    out.add(`Patient/${r.id}`);
  for (const [k, v] of Object.entries(value)) {
    if (k === 'reference' && typeof v === 'string') {
      const m = REF.exec(v);
      if (m) out.add(`Patient/${m[1]}`);
    } else if (typeof v === 'object') walk(v, out, depth + 1);
  }
}
