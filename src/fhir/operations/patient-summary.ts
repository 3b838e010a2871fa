// Patient/<id>/$summary (IPS 2.0.0, https://hl7.org/fhir/uv/ips/STU2/OperationDefinition-summary.html, API.md §11): an
// International Patient Summary document Bundle built on request from the patient's data the caller may read: a
// Composition (not stored) with the IPS sections, its author (a Device standing for this server, in the Bundle), the
// Patient, each section's entries, and what those reference, one level further. At most SECTION_LIMIT entries per
// section; Observation sections hold the newest Observation per code (the $lastn index).
import type { Queryable } from '../../storage/db.js';
import { assertRead, canRead, searchScope } from '../access.js';
import { FhirError } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import { readVisibleRow } from '../repository/read.js';
import { RawJson, type FhirResult } from '../result.js';
import { executeSearch } from '../search/execute.js';
import { parseSearchRequest } from '../search/parse.js';
import { operationParams } from './async-start.js';
import {
  collectReferences,
  documentBundleJson,
  escapeXhtml,
  fullUrlOf,
  readReferenced,
  type DocEntry,
  type StoredResource,
} from './document-bundle.js';
import { hitsSql, lastnGroups, type LastnParams } from './lastn.js';
import type { OperationDefinition, OperationInput } from './operation.js';

/** Entries one section holds at most (the newest first for Observations, storage order otherwise). */
export const SECTION_LIMIT = 100;
const LOINC = 'http://loinc.org';
const XHTML = 'http://www.w3.org/1999/xhtml';

type Source =
  /** `keep`: a test on the found resource's JSON, for what no search parameter tells (Flag has no `status`). */
  | { type: string; query: Record<string, string>; keep?: (resource: Record<string, unknown>) => boolean }
  | { type: 'Observation'; lastn: { categories?: string[]; codes?: { system: string; value: string }[] } };

interface SectionSpec {
  code: string;
  display: string;
  title: string;
  /** IPS 2.0.0 requires it: present, with `emptyReason` when there is nothing to list. */
  required: boolean;
  sources: Source[];
}

/** The IPS Composition's sections (StructureDefinition Composition-uv-ips 2.0.0) that Cinder fills, in its order. */
const SECTIONS: readonly SectionSpec[] = [
  {
    code: '11450-4',
    display: 'Problem list - Reported',
    title: 'Problems',
    required: true,
    sources: [
      {
        type: 'Condition',
        query: {
          'clinical-status': 'active,recurrence,relapse',
          'verification-status:not': 'entered-in-error',
        },
      },
    ],
  },
  {
    code: '48765-2',
    display: 'Allergies and adverse reactions Document',
    title: 'Allergies and Intolerances',
    required: true,
    sources: [{ type: 'AllergyIntolerance', query: { 'verification-status:not': 'entered-in-error' } }],
  },
  {
    code: '10160-0',
    display: 'History of Medication use Narrative',
    title: 'Medication Summary',
    required: true,
    sources: [
      { type: 'MedicationStatement', query: { status: 'active,intended,on-hold,unknown' } },
      { type: 'MedicationRequest', query: { status: 'active,on-hold' } },
    ],
  },
  {
    code: '11369-6',
    display: 'History of Immunization Narrative',
    title: 'Immunizations',
    required: false,
    sources: [{ type: 'Immunization', query: { 'status:not': 'entered-in-error' } }],
  },
  {
    code: '30954-2',
    display: 'Relevant diagnostic tests/laboratory data Narrative',
    title: 'Results',
    required: false,
    sources: [{ type: 'Observation', lastn: { categories: ['*|laboratory'] } }],
  },
  {
    code: '47519-4',
    display: 'History of Procedures Document',
    title: 'History of Procedures',
    required: false,
    sources: [{ type: 'Procedure', query: { 'status:not': 'entered-in-error' } }],
  },
  {
    code: '46264-8',
    display: 'History of medical device use',
    title: 'Medical Devices',
    required: false,
    sources: [{ type: 'DeviceUseStatement', query: {} }],
  },
  {
    code: '11348-0',
    display: 'History of Past illness Narrative',
    title: 'History of Past Illness',
    required: false,
    sources: [{ type: 'Condition', query: { 'clinical-status': 'inactive,remission,resolved' } }],
  },
  {
    code: '104605-1',
    display: 'Alert',
    title: 'Alerts',
    required: false,
    sources: [{ type: 'Flag', query: {}, keep: (f) => f.status === 'active' }],
  },
  {
    code: '18776-5',
    display: 'Plan of care note',
    title: 'Plan of Care',
    required: false,
    sources: [{ type: 'CarePlan', query: { status: 'active' } }],
  },
  {
    code: '29762-2',
    display: 'Social history Narrative',
    title: 'Social History',
    required: false,
    sources: [{ type: 'Observation', lastn: { categories: ['*|social-history'] } }],
  },
  {
    code: '10162-6',
    display: 'History of pregnancies Narrative',
    title: 'History of Pregnancy',
    required: false,
    sources: [
      {
        type: 'Observation',
        lastn: {
          codes: [
            { system: LOINC, value: '82810-3' },
            { system: LOINC, value: '11636-8' },
            { system: LOINC, value: '11778-8' },
          ],
        },
      },
    ],
  },
  {
    code: '8716-3',
    display: 'Vital signs',
    title: 'Vital Signs',
    required: false,
    sources: [{ type: 'Observation', lastn: { categories: ['*|vital-signs'] } }],
  },
];

/** The resources of one source: a search of the patient's, or the newest Observation per code. */
async function gather(
  db: Queryable,
  ctx: RepoContext,
  patientId: string,
  s: Source,
): Promise<StoredResource[]> {
  if ('lastn' in s) {
    const p: LastnParams = {
      subject: `Patient/${patientId}`,
      categories: s.lastn.categories ?? [''],
      ...(s.lastn.codes ? { codes: s.lastn.codes } : {}),
      max: 1,
    };
    const groups = (await lastnGroups(db, p)).slice(0, SECTION_LIMIT);
    if (groups.length === 0) return [];
    const q = hitsSql(groups, p, ctx.scope);
    const rows = (
      await db.query<{ rid: string; resource_type: string; id: string; json: string }>(q.text, q.values)
    ).rows;
    const seen = new Set<string>();
    return rows.flatMap((r) => {
      if (seen.has(r.id)) return [];
      seen.add(r.id);
      return [{ resourceType: r.resource_type, id: r.id, json: r.json }];
    });
  }
  const req = parseSearchRequest(s.type, { ...s.query, patient: patientId, _count: String(SECTION_LIMIT) });
  const found = await executeSearch(db, req, searchScope(ctx.actor, ctx.author, s.type, ctx.scope));
  const keep = s.keep;
  return found.matches
    .filter((m) => !keep || keep(JSON.parse(m.json) as Record<string, unknown>))
    .map((m) => ({ resourceType: m.resourceType, id: m.id, json: m.json }));
}

type Obj = Record<string, unknown>;

/** A short line of narrative for a resource: its code's text (or display, or code) and its status. */
function summaryLine(r: StoredResource): string {
  const o = JSON.parse(r.json) as Obj;
  const concept = (o.code ?? o.vaccineCode ?? o.medicationCodeableConcept) as Obj | undefined;
  const coding = Array.isArray(concept?.coding) ? ((concept.coding as Obj[])[0] ?? {}) : {};
  const name = [concept?.text, coding.display, coding.code].find((x) => typeof x === 'string' && x !== '');
  const status = typeof o.status === 'string' ? ` (${o.status})` : '';
  return `${r.resourceType}: ${typeof name === 'string' ? name : r.id}${status}`;
}

function narrative(items: string[], none: string): { status: string; div: string } {
  const body = items.length
    ? `<ul>${items.map((i) => `<li>${escapeXhtml(i)}</li>`).join('')}</ul>`
    : `<p>${escapeXhtml(none)}</p>`;
  return { status: 'generated', div: `<div xmlns="${XHTML}">${body}</div>` };
}

const emptyReason = (code: 'unavailable' | 'withheld') => ({
  coding: [
    {
      system: 'http://terminology.hl7.org/CodeSystem/list-empty-reason',
      code,
      display: code === 'unavailable' ? 'Unavailable' : 'Information Withheld',
    },
  ],
});

async function summary(db: Queryable, ctx: RepoContext, i: OperationInput): Promise<FhirResult> {
  const q = operationParams(i.request);
  for (const k of Object.keys(q))
    if (!['_format', '_pretty'].includes(k))
      throw new FhirError(
        'not-supported',
        `$summary does not support the parameter ${k.slice(0, 64)}`,
        'summary.param',
      );
  assertRead(ctx.actor, 'Patient', 'read', i.id);
  const row = await readVisibleRow(db, ctx, 'Patient', i.id);
  if (!row || row.deleted)
    throw new FhirError('not-found', `Not found: Patient/${i.id.slice(0, 64)}`, 'summary.not-found');
  const patient: StoredResource = { resourceType: 'Patient', id: row.id, json: row.json as string };
  const deviceId = ctx.newId();
  const device = {
    resourceType: 'Device',
    id: deviceId,
    deviceName: [{ name: 'Cinder FHIR server', type: 'manufacturer-name' }],
    type: { text: 'FHIR server that assembled this summary' },
  };
  const sections: Obj[] = [];
  const listed: StoredResource[] = [];
  const listedRefs = new Set<string>([`Patient/${row.id}`]);
  for (const spec of SECTIONS) {
    const readable = spec.sources.filter((s) => canRead(ctx.actor, s.type, 'search'));
    const found: StoredResource[] = [];
    for (const s of readable) found.push(...(await gather(db, ctx, row.id, s)));
    const entries = found.slice(0, SECTION_LIMIT);
    if (entries.length === 0 && !spec.required) continue;
    const withheld = readable.length < spec.sources.length;
    for (const r of entries) {
      const ref = `${r.resourceType}/${r.id}`;
      if (!listedRefs.has(ref)) listed.push(r);
      listedRefs.add(ref);
    }
    sections.push({
      title: spec.title,
      code: { coding: [{ system: LOINC, code: spec.code, display: spec.display }] },
      text: narrative(
        entries.map(summaryLine),
        withheld ? 'This information is not available to the requester.' : 'No information available.',
      ),
      ...(entries.length
        ? { entry: entries.map((r) => ({ reference: fullUrlOf(ctx, r) })) }
        : { emptyReason: emptyReason(withheld ? 'withheld' : 'unavailable') }),
    });
  }
  const now = ctx.clock().toISOString();
  const compositionId = ctx.newId();
  const composition = {
    resourceType: 'Composition',
    id: compositionId,
    meta: { profile: ['http://hl7.org/fhir/uv/ips/StructureDefinition/Composition-uv-ips'] },
    text: narrative([], `International Patient Summary of Patient/${row.id}, assembled ${now}.`),
    status: 'final',
    type: { coding: [{ system: LOINC, code: '60591-5', display: 'Patient summary Document' }] },
    subject: { reference: fullUrlOf(ctx, patient) },
    date: now,
    author: [{ reference: `urn:uuid:${deviceId}` }],
    title: 'International Patient Summary',
    section: sections,
  };
  // The Patient's and the section entries' own references (Medication, Practitioner, ...), one level.
  const rest = await referencedOnce(db, ctx, [patient, ...listed], listedRefs);
  const entries: DocEntry[] = [
    { fullUrl: `urn:uuid:${compositionId}`, json: JSON.stringify(composition) },
    { fullUrl: fullUrlOf(ctx, patient), json: patient.json },
    { fullUrl: `urn:uuid:${deviceId}`, json: JSON.stringify(device) },
    ...listed.map((r) => ({ fullUrl: fullUrlOf(ctx, r), json: r.json })),
    ...rest,
  ];
  return { status: 200, body: new RawJson(documentBundleJson(ctx, entries)) };
}

/** What the listed resources reference, read with the caller's access, one level (not what those reference). */
async function referencedOnce(
  db: Queryable,
  ctx: RepoContext,
  listed: readonly StoredResource[],
  already: ReadonlySet<string>,
): Promise<DocEntry[]> {
  const refs = new Set<string>();
  for (const r of listed) collectReferences(JSON.parse(r.json), ctx.fhirBase, refs);
  const found = await readReferenced(
    db,
    ctx,
    [...refs].filter((r) => !already.has(r)),
  );
  return found.map((r) => ({ fullUrl: fullUrlOf(ctx, r), json: r.json }));
}

export const patientSummaryOperation: OperationDefinition = {
  code: 'summary',
  level: 'instance',
  types: ['Patient'],
  affectsState: false,
  definition: 'http://hl7.org/fhir/uv/ips/OperationDefinition/summary',
  run: (env, i) => summary(env.db, i.ctx, i),
};
