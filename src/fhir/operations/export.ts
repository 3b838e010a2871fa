// Bulk Data kick-off: {fhir}/$export, {fhir}/Patient/$export, {fhir}/Group/<id>/$export
// (https://hl7.org/fhir/uv/bulkdata/export.html, API.md §5). Checks the request (headers and parameters:
// export-params.ts) and the caller's access, then enqueues an `export` job (src/jobs/kinds/export.ts) that exports
// only what the caller may read, within the caller's quota of active exports (API.md §1 `maxActiveExportsPerUser`,
// 429 beyond it). Patient and Group exports cover the R4 Patient compartment (its types, through its parameters).
// `_outputFormat=text/csv` (or `csv`) with `_fields` and exactly one `_type` exports that type as one CSV file with
// the columns and cells of $csv (API.md §6), without its 1000-row limit.
import type { Db, Queryable } from '../../storage/db.js';
import type { ExportParams } from '../../jobs/kinds/export.js';
import { EXPORT_KINDS } from '../../jobs/queue.js';
import { assertRead, assertWholeReach, canReadInBulk } from '../access.js';
import type { FhirpathPool } from '../csv/fhirpath-pool.js';
import { assertCsvType, csvTable, fieldsParam } from '../csv/table.js';
import { isResourceType, resourceTypes } from '../definitions/index.js';
import { inPatientCompartment } from '../definitions/patient-compartment.js';
import { FhirError } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import { readVisibleRow } from '../repository/read.js';
import type { FhirResult } from '../result.js';
import { assertRespondAsync, operationParams, startJob, type AsyncRequest } from './async-start.js';
import {
  assertAccept,
  elementsParam,
  handling,
  includeAssociatedData,
  KickOffNotes,
  list,
  patientRefs,
  since,
  typeFilters,
  warnUnknown,
} from './export-params.js';
import type { OperationDefinition, OperationEnv } from './operation.js';

const NDJSON = new Set(['application/fhir+ndjson', 'application/ndjson', 'ndjson']);
const CSV = new Set(['text/csv', 'csv']);

type Level = { kind: 'system' } | { kind: 'patient' } | { kind: 'group'; groupId: string };

/**
 * The types to export: `_type` (each known), or every type; only those the caller may read. At Patient and Group
 * level only Patient compartment types: others asked for are left out with a warning, and a request for none but
 * those is a 400 unless `Prefer: handling=lenient` (the IG, `_type`).
 */
function exportTypes(
  ctx: RepoContext,
  level: Level,
  asked: string[] | undefined,
  notes: KickOffNotes,
): string[] {
  const compartment = level.kind !== 'system';
  if (!asked)
    return resourceTypes().filter(
      (t) => canReadInBulk(ctx.actor, t) && (!compartment || inPatientCompartment(t)),
    );
  const types = list(asked);
  for (const t of types) {
    if (!isResourceType(t))
      throw new FhirError('invalid', `Unknown resource type in _type: ${t.slice(0, 64)}`, 'export.type');
  }
  if (!compartment) return types.filter((t) => canReadInBulk(ctx.actor, t));
  const outside = types.filter((t) => !inPatientCompartment(t));
  if (outside.length > 0 && outside.length === types.length && notes.handling !== 'lenient')
    throw new FhirError(
      'invalid',
      `Not in the Patient compartment, so not exported at Patient or Group level: ${outside.join(', ')}`,
      'export.type-compartment',
    );
  if (outside.length > 0)
    notes.warn(`Not in the Patient compartment, not exported: ${outside.join(', ')}`, 'type-compartment');
  return types.filter((t) => inPatientCompartment(t) && canReadInBulk(ctx.actor, t));
}

/** CSV: the one type (readable by the caller) and the checked `_fields` text. */
async function csvParams(
  ctx: RepoContext,
  level: Level,
  p: Record<string, string[]>,
  fhirpath: FhirpathPool,
): Promise<Pick<ExportParams, 'types' | 'format' | 'fields'>> {
  const types = list(p._type);
  if (types.length !== 1)
    throw new FhirError(
      'invalid',
      'A CSV export needs exactly one resource type in _type',
      'export.csv-type',
    );
  const type = types[0] as string;
  assertCsvType(type);
  assertRead(ctx.actor, type);
  if (level.kind !== 'system' && !inPatientCompartment(type))
    throw new FhirError('invalid', `${type} is not in the Patient compartment`, 'export.csv-compartment');
  if (p._elements)
    throw new FhirError(
      'invalid',
      '_elements does not apply to a CSV export (use _fields)',
      'export.csv-elements',
    );
  const fields = fieldsParam(p._fields);
  await csvTable(type, fields, fhirpath); // a 400 now rather than a failed job
  return { types: [type], format: 'csv', fields };
}

interface GroupMember {
  entity?: { reference?: string };
  inactive?: boolean;
  period?: { start?: string; end?: string };
}

/** Whether `now` is within a Period; a date-only end (or start) covers its whole day. */
function within(period: GroupMember['period'], now: number): boolean {
  const edge = (v: string | undefined, end: boolean): number | undefined => {
    if (v === undefined) return undefined;
    const ms = Date.parse(v);
    if (Number.isNaN(ms)) return undefined;
    return end && !v.includes('T') ? ms + 86_400_000 : ms;
  };
  const start = edge(period?.start, false);
  const end = edge(period?.end, true);
  return (start === undefined || start <= now) && (end === undefined || now < end);
}

/** The Group's current Patient members: not `inactive`, and within their `period` now. */
export async function groupPatients(
  db: Queryable,
  ctx: RepoContext,
  groupId: string,
  now: Date,
): Promise<string[]> {
  const row = await readVisibleRow(db, ctx, 'Group', groupId);
  if (!row || row.deleted)
    throw new FhirError('not-found', `Not found: Group/${groupId}`, 'export.group-not-found');
  const group = JSON.parse(row.json) as { member?: GroupMember[] };
  const ids = (group.member ?? [])
    .filter((m) => m.inactive !== true && within(m.period, now.getTime()))
    .map((m) => /^Patient\/([A-Za-z0-9\-.]{1,64})$/.exec(m.entity?.reference ?? '')?.[1])
    .filter((id): id is string => id !== undefined);
  return [...new Set(ids)];
}

/**
 * `patient` (Patient and Group level, STU2): the Patients the caller can read (and, for a Group, its current members).
 * Any other is left out with a warning in the job's error file (the Bulk Data Tester expects such a kick-off to
 * start), or refused under `Prefer: handling=strict`; one the caller cannot see gets the same words as a missing one.
 */
async function checkedPatients(
  db: Db,
  ctx: RepoContext,
  ids: string[],
  members: string[] | undefined,
  notes: KickOffNotes,
): Promise<string[]> {
  const set = members ? new Set(members) : undefined;
  const found: string[] = [];
  for (const id of ids) {
    const row = await readVisibleRow(db, ctx, 'Patient', id);
    if (row && !row.deleted && (!set || set.has(id))) found.push(id);
    else
      notes.warn(
        set
          ? `Patient/${id} is not a current member of the Group and was left out`
          : `Patient/${id} was not found and was left out`,
        'patient-not-found',
      );
  }
  return found;
}

/** `_typeFilter` queries for the exported types; a filter on another type is left out with a warning. */
function filtersFor(ctx: RepoContext, p: Record<string, string[]>, types: string[], notes: KickOffNotes) {
  const filters = typeFilters(p._typeFilter, ctx.actor, notes);
  for (const type of Object.keys(filters)) {
    if (type === 'AuditEvent') {
      // AuditEvents live in their own table (API.md §10), which the search index does not cover.
      notes.warn(
        '_typeFilter for AuditEvent was ignored: AuditEvents are exported whole',
        'type-filter-unused',
      );
      delete filters[type];
      continue;
    }
    if (types.includes(type)) continue;
    notes.warn(`_typeFilter for ${type} was ignored: ${type} is not exported`, 'type-filter-unused');
    delete filters[type];
  }
  return Object.keys(filters).length > 0 ? { typeFilters: filters } : {};
}

export async function startExport(
  { db, signals, maxActiveExportsPerUser, csv: { fhirpath } }: OperationEnv,
  ctx: RepoContext,
  level: Level,
  req: AsyncRequest,
): Promise<FhirResult> {
  assertWholeReach(ctx.scope, 'Bulk export');
  assertRespondAsync(req.prefer);
  assertAccept(req.accept);
  const notes = new KickOffNotes(handling(req.prefer));
  const p = operationParams(req);
  const format = p._outputFormat?.[0];
  const csv = format !== undefined && CSV.has(format);
  if (format !== undefined && !NDJSON.has(format) && !csv) {
    throw new FhirError('invalid', `Unsupported _outputFormat: ${format.slice(0, 64)}`, 'export.format');
  }
  warnUnknown(p, csv, notes);
  const now = ctx.clock();
  const asked = patientRefs(req, p);
  if (level.kind === 'system' && asked.length > 0)
    throw new FhirError(
      'invalid',
      'The patient parameter applies to Patient/$export and Group/<id>/$export, not to a system level export',
      'export.patient-system',
    );
  const selected = csv
    ? await csvParams(ctx, level, p, fhirpath)
    : { types: exportTypes(ctx, level, p._type, notes) };
  const elements = elementsParam(p._elements);
  includeAssociatedData(p.includeAssociatedData, notes);
  const members = level.kind === 'group' ? await groupPatients(db, ctx, level.groupId, now) : undefined;
  const patients = asked.length > 0 ? await checkedPatients(db, ctx, asked, members, notes) : members;
  const params: ExportParams = {
    level: level.kind,
    ...selected,
    since: since(p._since, now),
    projectId: ctx.scope.projectId,
    ...(patients ? { patients } : {}),
    ...filtersFor(ctx, p, selected.types, notes),
    ...(elements ? { elements } : {}),
    ...(notes.warnings.length > 0 ? { warnings: notes.warnings } : {}),
  };
  // Super administrators get the same quota: it guards the disk and the database against any runaway client.
  return startJob(db, signals, ctx, 'export', { ...params }, req.url, {
    kinds: EXPORT_KINDS,
    max: maxActiveExportsPerUser,
  });
}

const BULK = 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition';

export const exportOperations: OperationDefinition[] = [
  {
    code: 'export',
    level: 'system',
    affectsState: false,
    definition: `${BULK}/export`,
    run: (env, i) => startExport(env, i.ctx, { kind: 'system' }, i.request),
  },
  {
    code: 'export',
    level: 'type',
    types: ['Patient'],
    affectsState: false,
    definition: `${BULK}/patient-export`,
    capabilityName: 'patient-export',
    run: (env, i) => startExport(env, i.ctx, { kind: 'patient' }, i.request),
  },
  {
    code: 'export',
    level: 'instance',
    types: ['Group'],
    affectsState: false,
    definition: `${BULK}/group-export`,
    capabilityName: 'group-export',
    run: (env, i) => startExport(env, i.ctx, { kind: 'group', groupId: i.id }, i.request),
  },
];
