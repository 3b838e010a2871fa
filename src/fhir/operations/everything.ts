// Patient/<id>/$everything (https://hl7.org/fhir/R4/patient-operation-everything.html, issue 14 point 4): the Patient
// and every resource of its compartment (the R4 Patient CompartmentDefinition, as compartment search uses) that the
// caller may read, as a searchset Bundle paged in storage order: `_count` (default 100, at most 1000), `_since`
// (changed after), `_type` (these types only), and a `next` link. Resources the compartment's resources merely
// reference (a Medication, an Organization) are not added.
import type { Queryable } from '../../storage/db.js';
import { canRead } from '../access.js';
import { bundleToJson, type BundleEntryText } from '../bundle.js';
import { patientCompartment } from '../definitions/patient-compartment.js';
import { isResourceType } from '../definitions/index.js';
import { FhirError } from '../outcome.js';
import { readVisibleRow } from '../repository/read.js';
import { RawJson, type FhirResult } from '../result.js';
import { patientCondition } from '../search/patient-reach.js';
import { withNarrower } from '../search/reference-pairs.js';
import { contentJson } from '../search/sql.js';
import { operationParams } from './async-start.js';
import type { OperationDefinition, OperationInput } from './operation.js';

const DEFAULT_COUNT = 100;
const MAX_COUNT = 1000;

const bad = (text: string, code: string): FhirError => new FhirError('invalid', text, `everything.${code}`);
const first = (v: string[] | undefined): string | undefined => v?.[0];

function params(i: OperationInput): { count: number; since?: string; types?: string[]; after: number } {
  // From the query string and, by POST, a Parameters body (400 for a body of another shape).
  const q = operationParams(i.request);
  const countText = first(q._count);
  if (countText !== undefined && !/^\d{1,6}$/.test(countText))
    throw bad(`Invalid _count: ${countText.slice(0, 32)}`, 'count');
  const sinceText = first(q._since);
  const since = sinceText === undefined ? undefined : Date.parse(sinceText);
  if (since !== undefined && Number.isNaN(since))
    throw bad(`Invalid _since: ${String(sinceText).slice(0, 64)}`, 'since');
  const types = first(q._type)
    ?.split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  for (const t of types ?? [])
    if (!isResourceType(t)) throw bad(`Unknown resource type in _type: ${t.slice(0, 64)}`, 'type');
  const afterText = first(q._page_after);
  if (afterText !== undefined && !/^\d{1,18}$/.test(afterText)) throw bad('Invalid _page_after', 'page');
  return {
    count: Math.min(countText === undefined ? DEFAULT_COUNT : Number(countText), MAX_COUNT),
    ...(since !== undefined ? { since: new Date(since).toISOString() } : {}),
    ...(types ? { types } : {}),
    after: afterText === undefined ? 0 : Number(afterText),
  };
}

async function everything(db: Queryable, i: OperationInput): Promise<FhirResult> {
  const { ctx, id } = i;
  const p = params(i);
  const patient = await readVisibleRow(db, ctx, 'Patient', id);
  if (!patient || patient.deleted)
    throw new FhirError('not-found', `Not found: Patient/${id.slice(0, 64)}`, 'everything.not-found');
  // The compartment's types the caller may read (its role and its token's scopes), within `_type`.
  const compartment = patientCompartment();
  const types = [...compartment.keys()].filter(
    (t) => canRead(ctx.actor, t) && (!p.types || p.types.includes(t)),
  );
  const values: unknown[] = [];
  const bind = (v: unknown): string => `$${values.push(v)}`;
  // The types grouped by their compartment codes (with the narrower codes that hold some of their rows: Observation
  // `patient` for `subject`, reference-pairs.ts), so that each group's index ranges are exactly its (type, code) pairs
  // rather than every type with every code.
  const groups = new Map<string, { types: string[]; codes: string[] }>();
  for (const t of types) {
    const codes = withNarrower(t, compartment.get(t) ?? []);
    const key = codes.join(' ');
    const g = groups.get(key);
    if (g) g.types.push(t);
    else groups.set(key, { types: [t], codes });
  }
  // Bound only when used (a parameter the text does not use has no type, and the statement fails).
  const ref = groups.size > 0 ? bind(`Patient/${id}`) : '';
  // The Patient itself, and the resources whose compartment params reference it, found through the reference index
  // (type, param, `Patient/id`: an index range each) as one set of rids. Checked row by row from `r` instead, every
  // resource of the project was read (3.4 s at 5 million Observations).
  const members = [
    ...(!p.types || p.types.includes('Patient')
      ? [`SELECT s.rid FROM resources s WHERE s.resource_type = 'Patient' AND s.id = ${bind(id)}`]
      : []),
    ...[...groups.values()].map(
      (g) =>
        `SELECT x.rid FROM sp_reference x WHERE x.resource_type = ANY(${bind(g.types)}::text[]) ` +
        `AND x.code = ANY(${bind(g.codes)}::text[]) AND x.ref = ${ref}`,
    ),
  ];
  // None (`_type` names only types outside the compartment): no member.
  if (members.length === 0) members.push('SELECT NULL::bigint WHERE FALSE');
  const conds = ['NOT r.deleted', `r.rid > ${bind(p.after)}`, `r.rid IN (${members.join(' UNION ALL ')})`];
  if (ctx.scope.projectId !== null) conds.push(`r.project_id = ${bind(ctx.scope.projectId)}`);
  const reach = patientCondition(ctx.scope, 'r', bind);
  if (reach) conds.push(reach);
  if (p.since) conds.push(`r.last_updated > ${bind(p.since)}::timestamptz`);
  const rows = (
    await db.query<{ rid: string; resource_type: string; id: string; json: string }>(
      `SELECT r.rid, r.resource_type, r.id, ${contentJson('r', undefined, bind)} AS json FROM resources r ` +
        `WHERE ${conds.join(' AND ')} ORDER BY r.rid LIMIT ${bind(p.count + 1)}`,
      values,
    )
  ).rows;
  const more = rows.length > p.count;
  const page = more ? rows.slice(0, p.count) : rows;
  const selfUrl = `${ctx.fhirBase}/Patient/${id}/$everything`;
  const link = [{ relation: 'self', url: i.request.url }];
  const last = page[page.length - 1];
  if (more && last) {
    const next = new URL(i.request.url.startsWith('http') ? i.request.url : selfUrl);
    next.searchParams.set('_page_after', String(last.rid));
    link.push({ relation: 'next', url: next.toString() });
  }
  const entry: BundleEntryText[] = page.map((r) => ({
    fullUrl: `${ctx.fhirBase}/${r.resource_type}/${r.id}`,
    resource: r.json,
    search: { mode: 'match' },
  }));
  const total = !more && p.after === 0 ? { total: page.length } : {};
  return {
    status: 200,
    body: new RawJson(bundleToJson({ type: 'searchset', ...total, link, entry }, ctx.newId())),
  };
}

export const everythingOperation: OperationDefinition = {
  code: 'everything',
  level: 'instance',
  types: ['Patient'],
  affectsState: false,
  replicaReads: true,
  definition: 'http://hl7.org/fhir/OperationDefinition/Patient-everything',
  run: (env, i) => everything(env.db, i),
};
