// Builds an AuditEvent as IHE Basic Audit Log Patterns says (https://profiles.ihe.net/ITI/BALP/, R4 AuditEvent) from
// what a request was, who made it and what it touched, and the stored row around it (model.ts AuditRow). The one
// place that knows the codes; the HTTP layer and the repository only say what happened.
import {
  storableJson,
  type AuditAgent,
  type AuditEntity,
  type AuditKind,
  type AuditRow,
  type RestInteraction,
} from './model.js';

const AUDIT_TYPE = 'http://terminology.hl7.org/CodeSystem/audit-event-type';
const INTERACTION = 'http://hl7.org/fhir/restful-interaction';
const DCM = 'http://dicom.nema.org/resources/ontology/DCM';
const ENTITY_TYPE = 'http://terminology.hl7.org/CodeSystem/audit-entity-type';
const OBJECT_ROLE = 'http://terminology.hl7.org/CodeSystem/object-role';
const SOURCE_TYPE = 'http://terminology.hl7.org/CodeSystem/security-source-type';

const ACTION: Record<AuditKind, string> = {
  create: 'C',
  read: 'R',
  vread: 'R',
  search: 'R',
  history: 'R',
  update: 'U',
  patch: 'U',
  delete: 'D',
  batch: 'E',
  transaction: 'E',
  operation: 'E',
  login: 'E',
  logout: 'E',
};

/** What one request (or one write of a batch) amounts to: everything its AuditEvent says. */
export interface AuditFacts {
  id: string;
  kind: AuditKind;
  /** The project of the request's login ('' none). */
  projectId: string;
  recorded: Date;
  /** The HTTP status answered (a write stored in its own transaction: its success). */
  status: number;
  /** Why it failed (the OperationOutcome's or OAuth error's text), for `outcomeDesc`. */
  failure?: string;
  agent: AuditAgent;
  entities: readonly AuditEntity[];
  /** `Patient/<id>` of each patient whose data the request read or wrote. */
  patients: readonly string[];
  /** A search's query string (without `?`), recorded base64 in `entity.query`. */
  query?: string;
  /** What the request named: `GET Observation`, `POST $export`…, the query entity's description. */
  description?: string;
  /** Where this server is: the FHIR base (destination agent) and the base URL (source observer). */
  server: { fhirBase: string; baseUrl: string };
}

/** BALP's outcome: 0 success, 4 minor failure (a 4xx), 8 serious failure (a 5xx). */
export function outcomeOf(status: number): '0' | '4' | '8' {
  return status >= 500 ? '8' : status >= 400 ? '4' : '0';
}

const coding = (system: string, code: string, display?: string) => ({
  system,
  code,
  ...(display ? { display } : {}),
});

function typeOf(kind: AuditKind) {
  if (kind === 'login' || kind === 'logout') {
    return {
      type: coding(DCM, '110114', 'User Authentication'),
      subtype: [kind === 'login' ? coding(DCM, '110122', 'Login') : coding(DCM, '110123', 'Logout')],
    };
  }
  return {
    type: coding(AUDIT_TYPE, 'rest', 'Restful Operation'),
    subtype: [coding(INTERACTION, kind, kind satisfies RestInteraction)],
  };
}

// An AuditEvent is written for every request, so its JSON is put together from pieces made once: what each kind of
// request is (type, subtype, action, and their search columns), each entity's type and role, and per server its own
// agent and source. Only the values of the request itself are serialised each time.
const q = storableJson;

interface KindText {
  text: string;
  type: string;
  subtype: string[];
}
const KINDS = new Map<AuditKind, KindText>();
function kindText(kind: AuditKind): KindText {
  let k = KINDS.get(kind);
  if (!k) {
    const { type, subtype } = typeOf(kind);
    k = {
      text: `"type":${q(type)},"subtype":${q(subtype)},"action":${q(ACTION[kind])}`,
      type: `${type.system}|${type.code}`,
      subtype: subtype.map((c) => `${c.system}|${c.code}`),
    };
    KINDS.set(kind, k);
  }
  return k;
}

const ENTITY = {
  patient: `"type":${q(coding(ENTITY_TYPE, '1', 'Person'))},"role":${q(coding(OBJECT_ROLE, '1', 'Patient'))}`,
  resource: `"type":${q(coding(ENTITY_TYPE, '2', 'System Object'))},"role":${q(coding(OBJECT_ROLE, '4', 'Domain Resource'))}`,
  query: `"type":${q(coding(ENTITY_TYPE, '2', 'System Object'))},"role":${q(coding(OBJECT_ROLE, '24', 'Query'))}`,
};
const REQUESTER_TYPE = `"type":${q({ coding: [coding(DCM, '110153', 'Source Role ID')] })}`;
const CLIENT_TYPE = `"type":${q({ coding: [coding(DCM, '110150', 'Application')] })}`;

// By the server object (one per app, the same for every request), then by its text (a caller with its own objects).
const SERVER_OBJECTS = new WeakMap<AuditFacts['server'], { destination: string; source: string }>();
const SERVERS = new Map<string, { destination: string; source: string }>();
function serverText(server: AuditFacts['server']): { destination: string; source: string } {
  const known = SERVER_OBJECTS.get(server);
  if (known) return known;
  const key = `${server.fhirBase} ${server.baseUrl}`;
  let t = SERVERS.get(key);
  if (!t) {
    t = {
      destination: q({
        type: { coding: [coding(DCM, '110152', 'Destination Role ID')] },
        who: { display: server.fhirBase },
        requestor: false,
      }),
      source: q({
        observer: { display: server.baseUrl },
        type: [coding(SOURCE_TYPE, '4', 'Application Server')],
      }),
    };
    SERVERS.set(key, t);
  }
  SERVER_OBJECTS.set(server, t);
  return t;
}

function agentsText(f: AuditFacts): string {
  const a = f.agent;
  const who = a.who
    ? `"who":{"reference":${q(a.who)}},`
    : a.identifier !== undefined
      ? `"who":{"identifier":{"value":${q(a.identifier)}}},`
      : '';
  const requester =
    `{${REQUESTER_TYPE},${who}${a.membership ? `"altId":${q(a.membership)},` : ''}"requestor":true` +
    `${a.address ? `,"network":{"address":${q(a.address)},"type":"2"}` : ''}}`;
  const client =
    a.client && a.client !== a.who
      ? `,{${CLIENT_TYPE},"who":{"reference":${q(a.client)}},"requestor":false}`
      : '';
  return `[${requester}${client},${serverText(f.server).destination}]`;
}

function entitiesText(f: AuditFacts): string {
  const out: string[] = [];
  const patients = new Set(f.patients);
  for (const e of f.entities) {
    // A Patient read or written is named once, as the patient entity BALP asks for, with its version.
    const isPatient = patients.delete(e.reference);
    const what = e.version ? `${e.reference}/_history/${e.version}` : e.reference;
    out.push(`{"what":{"reference":${q(what)}},${isPatient ? ENTITY.patient : ENTITY.resource}}`);
  }
  if (f.query !== undefined) {
    const description = f.description ? `,"description":${q(f.description)}` : '';
    out.push(`{${ENTITY.query}${description},"query":"${Buffer.from(f.query, 'utf8').toString('base64')}"}`);
  }
  for (const p of patients) out.push(`{"what":{"reference":${q(p)}},${ENTITY.patient}}`);
  return out.length ? `,"entity":[${out.join(',')}]` : '';
}

/** The AuditEvent of `f` and its stored row. */
export function auditRow(f: AuditFacts): AuditRow {
  const kind = kindText(f.kind);
  const recorded = f.recorded.toISOString();
  const outcome = outcomeOf(f.status);
  const failure = outcome !== '0' && f.failure ? `,"outcomeDesc":${q(f.failure.slice(0, 1000))}` : '';
  const content =
    `{"resourceType":"AuditEvent","id":${q(f.id)},"meta":{"versionId":"1","lastUpdated":"${recorded}"},` +
    `${kind.text},"recorded":"${recorded}","outcome":"${outcome}"${failure},"agent":${agentsText(f)},` +
    `"source":${serverText(f.server).source}${entitiesText(f)}}`;
  const agentRefs = [f.agent.who, f.agent.membership, f.agent.client].filter(
    (x): x is string => typeof x === 'string',
  );
  return {
    id: f.id,
    projectId: f.projectId,
    recorded: f.recorded,
    type: kind.type,
    subtype: kind.subtype,
    action: ACTION[f.kind],
    outcome,
    agents: [...new Set(agentRefs)],
    entities: [...new Set(f.entities.map((e) => e.reference))],
    patients: [...new Set(f.patients)],
    content,
  };
}

/**
 * The row of an AuditEvent a client stores itself (API.md §10 "clients may create their own"): its columns read from
 * the resource as given.
 */
export function clientAuditRow(
  resource: Record<string, unknown>,
  projectId: string,
  recorded: Date,
): AuditRow {
  const arr = (v: unknown): Record<string, unknown>[] =>
    Array.isArray(v) ? v.filter((x): x is Record<string, unknown> => !!x && typeof x === 'object') : [];
  const ref = (v: unknown): string | undefined => {
    const r = (v as { reference?: unknown } | undefined)?.reference;
    return typeof r === 'string' ? r.replace(/\/_history\/.*$/, '') : undefined;
  };
  const tok = (c: unknown): string => {
    const x = (c ?? {}) as { system?: unknown; code?: unknown };
    return `${typeof x.system === 'string' ? x.system : ''}|${typeof x.code === 'string' ? x.code : ''}`;
  };
  const entityRefs = arr(resource.entity)
    .map((e) => ref(e.what))
    .filter((x): x is string => !!x);
  const id = resource.id as string;
  const content = storableJson(resource);
  return {
    id,
    projectId,
    recorded: typeof resource.recorded === 'string' ? new Date(resource.recorded) : recorded,
    type: tok(resource.type),
    subtype: arr(resource.subtype).map(tok),
    action: typeof resource.action === 'string' ? resource.action : null,
    outcome: typeof resource.outcome === 'string' ? resource.outcome : '',
    agents: [...new Set(arr(resource.agent).flatMap((a) => [ref(a.who)].filter((x): x is string => !!x)))],
    entities: [...new Set(entityRefs)],
    patients: [...new Set(entityRefs.filter((r) => r.startsWith('Patient/')))],
    content,
  };
}
