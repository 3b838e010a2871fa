// instance and type history: https://hl7.org/fhir/R4/http.html#history
import { AUDIT_EVENT } from './audit-events.js';
import type { Queryable } from '../../storage/db.js';
import { assertRead, canRead } from '../access.js';
import { resourceTypes } from '../definitions/index.js';
import { bundleToJson, type BundleEntryText } from '../bundle.js';
import { FhirError } from '../outcome.js';
import { RawJson, type FhirResult } from '../result.js';
import { patientCondition } from '../search/patient-reach.js';
import type { RepoContext } from './context.js';
import { readVisibleRow } from './read.js';
import { versionRowInReach } from './reach.js';
import { visible } from './context.js';
import { selectCurrent } from './store.js';

interface HistoryRow {
  resource_type: string;
  id: string;
  version_id: number;
  last_updated: Date;
  deleted: boolean;
  json: string | null;
}

export interface HistoryParams {
  _count?: string;
  _since?: string;
  _offset?: string;
  /** As in a search: `accurate` or `estimate` ask for `total` (counted), `none` leaves it out. */
  _total?: string;
}

function intParam(name: string, value: string | undefined, dflt: number, max: number): number {
  if (value === undefined) return dflt;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) {
    throw new FhirError('invalid', `Invalid ${name}: ${value.slice(0, 40)}`, 'history.bad-int');
  }
  return Math.min(n, max);
}

function sinceParam(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (
    !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(value) ||
    isNaN(Date.parse(value))
  ) {
    throw new FhirError(
      'invalid',
      `Invalid _since (an instant is required): ${value.slice(0, 40)}`,
      'history.bad-since',
    );
  }
  return new Date(value).toISOString();
}

function entry(ctx: RepoContext, r: HistoryRow, first: boolean): BundleEntryText {
  const url = `${r.resource_type}/${r.id}`;
  return {
    fullUrl: `${ctx.fhirBase}/${url}`,
    ...(r.json !== null && !r.deleted ? { resource: r.json } : {}),
    request: {
      method: r.deleted ? 'DELETE' : first ? 'POST' : 'PUT',
      url: r.version_id === 1 ? r.resource_type : url,
    },
    response: {
      status: r.deleted ? '204' : r.version_id === 1 ? '201' : '200',
      etag: `W/"${r.version_id}"`,
      lastModified: r.last_updated.toISOString(),
    },
  };
}

/**
 * The types a system history (`GET {fhir}/_history`) shows: those the caller may search. AsyncJob is left out for
 * callers who may only see the jobs they started (a type search narrows those; a system history does not).
 */
function systemHistoryTypes(ctx: RepoContext): string[] {
  return resourceTypes().filter(
    (t) =>
      canRead(ctx.actor, t, 'search') && (t !== 'AsyncJob' || ctx.actor.superAdmin || ctx.actor.projectAdmin),
  );
}

/** The most versions of one resource judged for a token narrowed by patient/ scopes (its instance history). */
const MAX_JUDGED = 10_000;

/**
 * The versions (newest first) in the reach of the caller's patient, each judged on its own content; a deletion is
 * judged on the version it deleted when that is among `rows` (the rows of one resource), else kept: the search index
 * already placed the resource in reach.
 */
function inReachVersions(ctx: RepoContext, rows: HistoryRow[]): HistoryRow[] {
  return rows.filter((r, i) => {
    if (!r.deleted) return versionRowInReach(ctx.scope.patient, r);
    const before = rows[i + 1];
    return before === undefined || before.id !== r.id || before.resource_type !== r.resource_type
      ? true
      : versionRowInReach(ctx.scope.patient, before);
  });
}

/**
 * The resource types that have rows in resource_history (past versions) and in resources (current ones), each read
 * by skipping through the table's (resource_type, last_updated) index: one probe per type, whatever the rows.
 */
async function typesHeld(db: Queryable): Promise<{ past: Set<string>; current: Set<string> }> {
  const skip = (table: string, cte: string): string =>
    `${cte}(t) AS (
       (SELECT resource_type FROM ${table} ORDER BY resource_type LIMIT 1)
       UNION ALL
       SELECT (SELECT x.resource_type FROM ${table} x WHERE x.resource_type > ${cte}.t ORDER BY x.resource_type LIMIT 1)
       FROM ${cte} WHERE ${cte}.t IS NOT NULL)`;
  const r = await db.query<{ side: string; t: string }>(
    `WITH RECURSIVE ${skip('resource_history', 'p')}, ${skip('resources', 'c')}
     SELECT 'past' AS side, t FROM p WHERE t IS NOT NULL
     UNION ALL SELECT 'current', t FROM c WHERE t IS NOT NULL`,
    [],
    { prepare: true },
  );
  const past = new Set<string>();
  const current = new Set<string>();
  for (const row of r.rows) (row.side === 'past' ? past : current).add(row.t);
  return { past, current };
}

/** Instance (`id`), type, or system (`resourceType` undefined) history. */
export async function history(
  db: Queryable,
  ctx: RepoContext,
  resourceType: string | undefined,
  id: string | undefined,
  params: HistoryParams,
  selfUrl: string,
): Promise<FhirResult> {
  if (resourceType === AUDIT_EVENT)
    throw new FhirError(
      'not-supported',
      'AuditEvents have no history: each has one version',
      'audit.history',
      {
        status: 405,
      },
    );
  // SMART: instance history is a read (r), type history a search (s).
  if (resourceType !== undefined)
    assertRead(ctx.actor, resourceType, id === undefined ? 'search' : 'read', id);
  const count = intParam('_count', params._count, 20, 1000);
  const offset = intParam('_offset', params._offset, 0, Number.MAX_SAFE_INTEGER);
  const since = sinceParam(params._since);
  const typeCond = resourceType !== undefined ? 'resource_type = $1' : 'resource_type = ANY($1::text[])';
  const types = resourceType ?? systemHistoryTypes(ctx);
  /** The conditions besides the type. */
  const where: string[] = [];
  const args: unknown[] = [types];
  // A token narrowed by patient/ scopes sees the versions that were in its patient's compartment, each judged on its
  // own content (a resource moved between patients); the search index, which holds the current versions, preselects
  // a type's or the system's history.
  const narrowed = patientCondition(ctx.scope, 'r', () => '', resourceType) !== undefined;
  if (id !== undefined && resourceType !== undefined) {
    const row = narrowed
      ? await selectCurrent(db, resourceType, id).then((r) =>
          r && visible(ctx, r.project_id) ? r : undefined,
        )
      : await readVisibleRow(db, ctx, resourceType, id);
    if (!row) throw new FhirError('not-found', `Not found: ${resourceType}/${id}`, 'history.not-found');
    // By rid (the history's key, kept for life): by id alone, the rows of every resource of the type are read.
    args.push(row.rid);
    where.push(`rid = $${args.length}`);
  } else if (ctx.scope.projectId !== null) {
    args.push(ctx.scope.projectId);
    where.push(`project_id = $${args.length}`);
  }
  if (since) {
    args.push(since);
    where.push(`last_updated > $${args.length}`);
  }
  // An instance's versions are all read (up to MAX_JUDGED, newest first) and judged one by one.
  const judgeAll = narrowed && id !== undefined;
  const reach = judgeAll
    ? undefined
    : patientCondition(ctx.scope, 'r', (v) => `$${args.push(v)}`, resourceType);
  if (reach) where.push(`rid IN (SELECT r.rid FROM resources r WHERE ${reach})`);
  const all = [typeCond, ...where].join(' AND ');
  const totalParam = params._total;
  if (totalParam !== undefined && !['none', 'estimate', 'accurate'].includes(totalParam))
    throw new FhirError(
      'invalid',
      `Invalid _total '${totalParam.slice(0, 40)}': expected none, estimate or accurate`,
      'history.bad-total',
    );
  // `total` is counted for an instance (its versions, by key) or when asked (`_total`, or `_count=0` as in a
  // search). A type's or the system's history is counted otherwise only when its first page holds every entry:
  // counting five million versions took 1.4 s (one type) and 4 s (the system), for a page that takes 1 ms.
  // Bundle.total is optional in a history.
  const countByDefault = totalParam === undefined && (id !== undefined || count === 0);
  // resource_history holds the versions no longer current; the current ones are the rows of resources (a deleted row
  // as the deletion, without content). Each is counted, and each side read through its own index, then merged.
  let counted: number | undefined;
  if (!judgeAll && (totalParam === 'accurate' || totalParam === 'estimate' || countByDefault)) {
    const r = await db.query<{ n: number }>(
      `SELECT (SELECT count(*) FROM resource_history WHERE ${all})::int +
              (SELECT count(*) FROM resources WHERE ${all})::int AS n`,
      args,
    );
    counted = r.rows[0]?.n ?? 0;
  }
  const past = 'resource_type, id, version_id, last_updated, deleted, content::text AS json, rid';
  const current =
    'resource_type, id, version_id, last_updated, deleted, CASE WHEN deleted THEN NULL ELSE content::text END AS json, rid';
  const order = 'ORDER BY last_updated DESC, rid DESC, version_id DESC';
  // Each side gives at most the rows of the page and those before it, newest first; the merge orders and pages them.
  args.push(judgeAll ? MAX_JUDGED : count + 1 + offset);
  const perSide = `$${args.length}`;
  const pastSide = (cond: string): string =>
    `(SELECT ${past} FROM resource_history WHERE ${cond} ${order} LIMIT ${perSide})`;
  const currentSide = (cond: string): string =>
    `(SELECT ${current} FROM resources WHERE ${cond} ${order} LIMIT ${perSide})`;
  let source = `${pastSide(all)} UNION ALL ${currentSide(all)}`;
  if (typeof types !== 'string') {
    // The system's history: the newest of each type, then the newest of those. The (resource_type, last_updated)
    // indexes order one type at a time; with all the types in one condition PostgreSQL read and sorted every version
    // (2.4 s at 5 million). Only the types each table holds get a branch: planning a branch per type and table
    // (some 300) took longer than running them.
    const rest = where.map((c) => ` AND ${c}`).join('');
    const held = await typesHeld(db);
    const branches = types.flatMap((t, i) => {
      const cond = `resource_type = ($1::text[])[${i + 1}]${rest}`;
      return [
        ...(held.past.has(t) ? [pastSide(cond)] : []),
        ...(held.current.has(t) ? [currentSide(cond)] : []),
      ];
    });
    source = branches.length ? branches.join(' UNION ALL ') : `${currentSide('false')}`;
  }
  args.push(judgeAll ? MAX_JUDGED : count + 1, judgeAll ? 0 : offset);
  const fetched = await db.query<HistoryRow>(
    `SELECT resource_type, id, version_id, last_updated, deleted, json FROM (${source}) h ${order}
     LIMIT $${args.length - 1} OFFSET $${args.length}`,
    args,
  );
  let rows = fetched.rows;
  if (narrowed) {
    rows = inReachVersions(ctx, rows);
    if (judgeAll) {
      // None of its versions was ever the patient's: to this caller the resource does not exist.
      if (rows.length === 0)
        throw new FhirError('not-found', `Not found: ${resourceType}/${id}`, 'history.not-found');
      counted = rows.length;
      rows = rows.slice(offset, offset + count + 1);
    } else if (rows.length < fetched.rows.length) counted = undefined;
  }
  const page = rows.slice(0, count);
  const link = [{ relation: 'self', url: selfUrl }];
  const pageAt = (at: number | undefined): string => {
    const u = new URL(selfUrl);
    if (at === undefined) u.searchParams.delete('_offset');
    else u.searchParams.set('_offset', String(at));
    u.searchParams.set('_count', String(count));
    return u.toString();
  };
  if (offset > 0) {
    link.push({ relation: 'first', url: pageAt(undefined) });
    link.push({ relation: 'previous', url: pageAt(Math.max(0, offset - count)) });
  }
  if (rows.length > count) link.push({ relation: 'next', url: pageAt(offset + count) });
  const text = bundleToJson(
    {
      type: 'history',
      ...(counted !== undefined
        ? { total: counted }
        : totalParam === undefined &&
            offset === 0 &&
            rows.length <= count &&
            rows.length === fetched.rows.length
          ? { total: rows.length }
          : {}),
      link,
      entry: page.map((r) => entry(ctx, r, r.version_id === 1)),
    },
    ctx.newId(),
  );
  return { status: 200, body: new RawJson(text) };
}
