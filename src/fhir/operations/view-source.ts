// The resources a view runs over when none are given inline: the caller's stored resources of the view's type, in
// rid order, within `patient` or `group` compartments and `_since`, read page by page with the bulk export's own
// query (src/jobs/kinds/export-query.ts) so both operations select data the same way. API.md §7.
import type { Queryable } from '../../storage/db.js';
import type { ExportParams } from '../../jobs/kinds/export.js';
import { pageQuery } from '../../jobs/kinds/export-query.js';
import { assertRead, assertWholeReach } from '../access.js';
import { FhirError } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import { readVisibleRow } from '../repository/read.js';
import { since } from './export-params.js';
import { groupPatients } from './export.js';

/** What selects the stored data: the export's parameters for one type. */
export type ViewData = Pick<ExportParams, 'level' | 'since' | 'projectId' | 'patients'>;

/**
 * The data selection of a call over stored `types` (each must be searchable by the caller): `patient` ids (each must
 * be visible), a `group`'s current members, `_since`.
 */
export async function viewData(
  db: Queryable,
  ctx: RepoContext,
  types: readonly string[],
  sel: { patients: string[]; group?: string; since?: unknown },
): Promise<ViewData> {
  assertWholeReach(ctx.scope, 'Running a view over stored data');
  for (const type of new Set(types)) assertRead(ctx.actor, type, 'search');
  const now = ctx.clock();
  let patients: string[] | undefined;
  if (sel.group !== undefined) {
    assertRead(ctx.actor, 'Group', 'read');
    patients = await groupPatients(db, ctx, sel.group, now);
  }
  if (sel.patients.length > 0) {
    for (const id of sel.patients) {
      const row = await readVisibleRow(db, ctx, 'Patient', id);
      if (!row || row.deleted)
        throw new FhirError('not-found', `Not found: Patient/${id}`, 'views.patient-not-found');
    }
    patients = patients ? sel.patients.filter((id) => patients?.includes(id)) : sel.patients;
  }
  return {
    level: patients ? 'patient' : 'system',
    since: since(sel.since === undefined ? undefined : [String(sel.since)], now),
    projectId: ctx.scope.projectId,
    ...(patients ? { patients } : {}),
  };
}

/** One page of stored resources of `type` after rid `after`, in rid order: at most `size`. */
export async function storedPage(
  db: Queryable,
  data: ViewData,
  type: string,
  after: number,
  size: number,
): Promise<{ rid: number | string; json: string }[]> {
  const q = pageQuery({ ...data, types: [type] }, type, after, size, undefined);
  return (await db.query<{ rid: number | string; json: string }>(q.text, q.values)).rows;
}

/** Pages of stored resources (JSON texts) of `type`, after rid `after`; each page at most `size` resources. */
export async function* storedPages(
  db: Queryable,
  data: ViewData,
  type: string,
  size: number,
  after = 0,
): AsyncGenerator<{ jsons: string[]; last: number }> {
  for (;;) {
    const rows = await storedPage(db, data, type, after, size);
    if (rows.length === 0) return;
    after = Number(rows[rows.length - 1]?.rid);
    yield { jsons: rows.map((r) => r.json), last: after };
    if (rows.length < size) return;
  }
}
