// Bulk Data kick-off: {fhir}/$export, {fhir}/Patient/$export, {fhir}/Group/<id>/$export
// (https://hl7.org/fhir/uv/bulkdata/export.html, API.md §5). Checks the request and the caller's access, then
// enqueues an `export` job (src/jobs/kinds/export.ts) that exports only what the caller may read, within the
// caller's quota of active exports (API.md §1 `maxActiveExportsPerUser`, 429 beyond it).
// `_outputFormat=text/csv` (or `csv`) with `_fields` and exactly one `_type` exports that type as one CSV file with
// the columns and cells of $csv (API.md §6), without its 1000-row limit.
import type { Db } from '../../storage/db.js';
import type { ExportParams } from '../../jobs/kinds/export.js';
import { EXPORT_KINDS } from '../../jobs/queue.js';
import { assertRead, canRead } from '../access.js';
import type { FhirpathPool } from '../csv/fhirpath-pool.js';
import { assertCsvType, csvTable, fieldsParam } from '../csv/table.js';
import { isResourceType, resourceTypes } from '../definitions/index.js';
import { FhirError } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import { readVisibleRow } from '../repository/read.js';
import type { FhirResult } from '../result.js';
import { assertRespondAsync, operationParams, startJob, type AsyncRequest } from './async-start.js';
import type { OperationDefinition, OperationEnv } from './operation.js';

const NDJSON = new Set(['application/fhir+ndjson', 'application/ndjson', 'ndjson']);
const CSV = new Set(['text/csv', 'csv']);

function exportTypes(ctx: RepoContext, asked: string[] | undefined): string[] {
  if (!asked) return resourceTypes().filter((t) => canRead(ctx.actor, t));
  const types = [...new Set(asked.flatMap((v) => v.split(',')).map((t) => t.trim()))].filter(Boolean);
  for (const t of types) {
    if (!isResourceType(t))
      throw new FhirError('invalid', `Unknown resource type in _type: ${t.slice(0, 64)}`, 'export.type');
  }
  return types.filter((t) => canRead(ctx.actor, t));
}

/** CSV: the one type (readable by the caller) and the checked `_fields` text. */
async function csvParams(
  ctx: RepoContext,
  p: Record<string, string[]>,
  fhirpath: FhirpathPool,
): Promise<Pick<ExportParams, 'types' | 'format' | 'fields'>> {
  const types = [...new Set((p._type ?? []).flatMap((v) => v.split(',')).map((t) => t.trim()))].filter(
    Boolean,
  );
  if (types.length !== 1)
    throw new FhirError(
      'invalid',
      'A CSV export needs exactly one resource type in _type',
      'export.csv-type',
    );
  const type = types[0] as string;
  assertCsvType(type);
  assertRead(ctx.actor, type);
  const fields = fieldsParam(p._fields);
  await csvTable(type, fields, fhirpath); // a 400 now rather than a failed job
  return { types: [type], format: 'csv', fields };
}

function since(values: string[] | undefined): string | null {
  const v = values?.[0];
  if (v === undefined) return null;
  const ms = /^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2}))?$/.test(v) ? Date.parse(v) : NaN;
  if (Number.isNaN(ms)) throw new FhirError('invalid', `Invalid _since: ${v.slice(0, 64)}`, 'export.since');
  return new Date(ms).toISOString();
}

async function groupPatients(db: Db, ctx: RepoContext, groupId: string): Promise<string[]> {
  const row = await readVisibleRow(db, ctx, 'Group', groupId);
  if (!row || row.deleted)
    throw new FhirError('not-found', `Not found: Group/${groupId}`, 'export.group-not-found');
  const group = JSON.parse(row.json) as { member?: { entity?: { reference?: string } }[] };
  return (group.member ?? [])
    .map((m) => /^Patient\/([A-Za-z0-9\-.]{1,64})$/.exec(m.entity?.reference ?? '')?.[1])
    .filter((id): id is string => id !== undefined);
}

export async function startExport(
  { db, signals, maxActiveExportsPerUser, csv: { fhirpath } }: OperationEnv,
  ctx: RepoContext,
  level: { kind: 'system' } | { kind: 'patient' } | { kind: 'group'; groupId: string },
  req: AsyncRequest,
): Promise<FhirResult> {
  assertRespondAsync(req.prefer);
  const p = operationParams(req);
  const format = p._outputFormat?.[0];
  const csv = format !== undefined && CSV.has(format);
  if (format !== undefined && !NDJSON.has(format) && !csv) {
    throw new FhirError('invalid', `Unsupported _outputFormat: ${format.slice(0, 64)}`, 'export.format');
  }
  const params: ExportParams = {
    level: level.kind,
    ...(csv ? await csvParams(ctx, p, fhirpath) : { types: exportTypes(ctx, p._type) }),
    since: since(p._since),
    projectId: ctx.scope.projectId,
    ...(level.kind === 'group' ? { patients: await groupPatients(db, ctx, level.groupId) } : {}),
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
    run: (env, i) => startExport(env, i.ctx, { kind: 'patient' }, i.request),
  },
  {
    code: 'export',
    level: 'instance',
    types: ['Group'],
    affectsState: false,
    definition: `${BULK}/group-export`,
    run: (env, i) => startExport(env, i.ctx, { kind: 'group', groupId: i.id }, i.request),
  },
];
