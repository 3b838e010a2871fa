// The Audit page's pure logic (API.md §10): the AuditEvent search built from the page's filters, and one table row
// read from an AuditEvent shaped by IHE BALP (who asked, what they did, which resources and patients, the outcome).
import type { Resource } from './fhir.js';

interface Coding {
  system?: string;
  code?: string;
  display?: string;
}

interface Reference {
  reference?: string;
  display?: string;
  identifier?: { system?: string; value?: string };
}

export interface AuditEvent extends Resource {
  type?: Coding;
  subtype?: Coding[];
  action?: string;
  recorded?: string;
  outcome?: string;
  outcomeDesc?: string;
  agent?: {
    type?: { coding?: Coding[] };
    who?: Reference;
    altId?: string;
    requestor?: boolean;
    network?: { address?: string };
  }[];
  entity?: { what?: Reference; type?: Coding; role?: Coding; query?: string; name?: string }[];
}

/** The page's filters as typed: days as `YYYY-MM-DD` (an `<input type="date">`'s value), references as text. */
export interface AuditFilters {
  from: string;
  to: string;
  agent: string;
  patient: string;
}

export const NO_FILTERS: AuditFilters = { from: '', to: '', agent: '', patient: '' };

const DAY = /^(\d{4})-(\d{2})-(\d{2})$/;

/**
 * The instant a local day starts (`days` later when given), in UTC to the second: `2026-11-27` in Paris →
 * `2026-11-26T23:00:00Z`. The table shows local times, so the filters are local days too. `undefined` when not a day.
 */
export function dayStart(day: string, days = 0): string | undefined {
  const m = DAY.exec(day.trim());
  if (!m) return undefined;
  const d = new Date(Number(m[1]), Number(m[2]) - 1, Number(m[3]) + days);
  if (Number.isNaN(d.getTime())) return undefined;
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * The query string of `AuditEvent?…` for the filters: `date=ge<from's start>`, `date=lt<the start of the day after
 * to>` (the whole of the "to" day, at any precision the server keeps), `agent` and `patient` as typed (trimmed).
 */
export function auditQuery(f: AuditFilters, count: number): string {
  const q = new URLSearchParams();
  const from = dayStart(f.from);
  if (from) q.append('date', `ge${from}`);
  const to = dayStart(f.to, 1);
  if (to) q.append('date', `lt${to}`);
  const agent = f.agent.trim();
  if (agent) q.set('agent', agent);
  const patient = f.patient.trim();
  if (patient) q.set('patient', patient);
  q.set('_count', String(count));
  return q.toString();
}

/** Why the filters cannot be searched (a "to" day before the "from" day), or undefined. */
export function filtersProblem(f: AuditFilters): string | undefined {
  const from = dayStart(f.from);
  const to = dayStart(f.to);
  if (from && to && to < from) return 'The "to" date is before the "from" date.';
  return undefined;
}

export type OutcomeKind = 'success' | 'client-error' | 'server-error' | 'major-failure' | 'unknown';

/** One row of the Audit table. */
export interface AuditRow {
  id: string;
  recorded?: string;
  /** The requester as people read it: its display, else its reference, else the identifier a failed sign-in tried. */
  who: string;
  /** The requester's reference (shown under its display) or, for a failed sign-in, `tried <identifier>`. */
  whoDetail?: string;
  /** What was done: the interaction (`read`, `search`, …), `Sign-in`, `Sign-out`, or the type's display. */
  what: string;
  /** The action in words: Create, Read, Update, Delete, Execute. */
  action?: string;
  /** The resources read or written, with their versions (`Observation/o1/_history/2`). */
  resources: string[];
  /** A search's query string, decoded from base64. */
  query?: string;
  /** The patients whose data the answer held (`Patient/<id>`). */
  patients: string[];
  outcome: OutcomeKind;
  /** The outcome in words: `Success`, `Client error (4xx)`, … */
  outcomeText: string;
  /** The server's description of a failure. */
  outcomeDesc?: string;
  /** The network address the request came from. */
  address?: string;
}

const ACTIONS: Record<string, string> = { C: 'Create', R: 'Read', U: 'Update', D: 'Delete', E: 'Execute' };

const OUTCOMES: Record<string, { kind: OutcomeKind; text: string }> = {
  '0': { kind: 'success', text: 'Success' },
  '4': { kind: 'client-error', text: 'Client error (4xx)' },
  '8': { kind: 'server-error', text: 'Server error (5xx)' },
  '12': { kind: 'major-failure', text: 'Major failure' },
};

const DCM = 'http://dicom.nema.org/resources/ontology/DCM';
const SUBTYPES_DCM: Record<string, string> = { '110122': 'Sign-in', '110123': 'Sign-out' };
/** audit-entity-type 1 (Person) with object-role 1 (Patient): BALP's patient entity. */
const PATIENT_ROLE = '1';
/** object-role 24 (Query): a search's entity, with `query`. */
const QUERY_ROLE = '24';

/** Base64 (of UTF-8 text) as text; undefined when it is not base64. */
export function decodeBase64(b64: string): string | undefined {
  try {
    const bytes = Uint8Array.from(atob(b64.replace(/\s+/g, '')), (c) => c.charCodeAt(0));
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/** `Patient/p1/_history/3` → `Patient/p1`; a bare id `p1` → `Patient/p1`. */
function patientRef(ref: string): string {
  const bare = ref.replace(/\/_history\/[^/]+$/, '');
  return bare.includes('/') ? bare : `Patient/${bare}`;
}

const unique = (xs: string[]): string[] => [...new Set(xs)];

/** The AuditEvent as a row of the Audit table. */
export function auditRow(e: AuditEvent): AuditRow {
  const agents = e.agent ?? [];
  const requester = agents.find((a) => a.requestor === true) ?? agents[0];
  const who = requester?.who;
  const tried = who?.identifier?.value;
  const name = who?.display || who?.reference || tried || 'Unknown';
  const whoDetail =
    who?.display && who.reference ? who.reference : !who?.reference && tried ? `tried ${tried}` : undefined;

  const sub = e.subtype?.[0];
  const dcm = sub?.system === DCM && sub.code ? SUBTYPES_DCM[sub.code] : undefined;
  const what =
    dcm ??
    sub?.display ??
    sub?.code ??
    (e.type?.system === DCM && e.type.code === '110114' ? 'Authentication' : undefined) ??
    e.type?.display ??
    e.type?.code ??
    '—';

  const resources: string[] = [];
  const patients: string[] = [];
  let query: string | undefined;
  for (const ent of e.entity ?? []) {
    const role = ent.role?.code;
    const ref = ent.what?.reference;
    if (role === QUERY_ROLE && ent.query) query = decodeBase64(ent.query) ?? ent.query;
    if (!ref) continue;
    if (role === PATIENT_ROLE) patients.push(patientRef(ref));
    else resources.push(ref);
  }

  const outcome = OUTCOMES[e.outcome ?? ''] ?? {
    kind: 'unknown' as const,
    text: e.outcome ? `Outcome ${e.outcome}` : 'Not recorded',
  };
  const address = requester?.network?.address;
  const action = e.action ? (ACTIONS[e.action] ?? e.action) : undefined;
  return {
    id: e.id ?? '',
    ...(e.recorded ? { recorded: e.recorded } : {}),
    who: name,
    ...(whoDetail ? { whoDetail } : {}),
    what,
    ...(action ? { action } : {}),
    resources: unique(resources),
    ...(query !== undefined ? { query } : {}),
    patients: unique(patients),
    outcome: outcome.kind,
    outcomeText: outcome.text,
    ...(e.outcomeDesc ? { outcomeDesc: e.outcomeDesc } : {}),
    ...(address ? { address } : {}),
  };
}

/** Rows newest first (the server's order; kept when pages are appended), the undated last. */
export function newestFirst(rows: AuditRow[]): AuditRow[] {
  const t = (r: AuditRow): number => {
    const ms = r.recorded ? Date.parse(r.recorded) : NaN;
    return Number.isNaN(ms) ? -Infinity : ms;
  };
  return [...rows].sort((a, b) => {
    const d = t(b) - t(a);
    return Number.isNaN(d) ? 0 : d;
  });
}
