// AuditEvent through the REST API (API.md §10): read, vread and search over the audit table (migration 018), never
// among the resources; creates a client makes itself go there too; update, patch and delete do not exist (405).
// Search reads the table's columns: date (recorded), agent, entity, patient (references), type, subtype, action,
// outcome (tokens), _id; newest first (`recorded`, then insertion order), paged by a cursor on both.
import type { Queryable } from '../../storage/db.js';
import { clientAuditRow } from '../../audit/balp.js';
import type { AuditRow } from '../../audit/model.js';
import { auditReach, type AuditReach } from '../access.js';
import { bundleToJson } from '../bundle.js';
import { isValidId } from '../id.js';
import { FhirError } from '../outcome.js';
import { RawJson, type FhirResult } from '../result.js';
import { dateRangeMs } from '../search/normalise.js';
import type { RepoContext } from './context.js';
import type { PreparedWrite } from './prepare.js';

export const AUDIT_EVENT = 'AuditEvent';

/** The audit rows of the AuditEvents among `items` (a client's own creates); the rest are ordinary resources. */
export function splitAuditCreates(items: readonly PreparedWrite[]): {
  rows: AuditRow[];
  rest: PreparedWrite[];
} {
  if (!items.some((i) => i.resource.resourceType === AUDIT_EVENT)) return { rows: [], rest: [...items] };
  const rows: AuditRow[] = [];
  const rest: PreparedWrite[] = [];
  for (const it of items) {
    if (it.resource.resourceType !== AUDIT_EVENT) rest.push(it);
    else rows.push(clientAuditRow(it.resource as Record<string, unknown>, it.projectId, it.lastUpdated));
  }
  return { rows, rest };
}

interface Cond {
  sql: string[];
  params: unknown[];
}

const add = (c: Cond, value: unknown): string => {
  c.params.push(value);
  return `$${c.params.length}`;
};

function reachSql(c: Cond, reach: AuditReach): void {
  if (reach.projectId !== null) c.sql.push(`project_id = ${add(c, reach.projectId)}`);
  if (reach.patient !== undefined) c.sql.push(`patients @> ARRAY[${add(c, `Patient/${reach.patient}`)}]`);
}

const badParam = (name: string, value: string): FhirError =>
  new FhirError('invalid', `Invalid value for ${name}: ${value.slice(0, 100)}`, 'audit.search-value');

/** A reference value: `Type/id`, an absolute URL under this server, or a bare id (`defaultType`, or any type). */
function referenceOf(ctx: RepoContext, name: string, value: string, defaultType?: string): string {
  let v = value.startsWith(`${ctx.fhirBase}/`) ? value.slice(ctx.fhirBase.length + 1) : value;
  v = v.replace(/\/_history\/[^/]*$/, '');
  const m = /^(?:([A-Z][A-Za-z]{0,63})\/)?([A-Za-z0-9\-.]{1,64})$/.exec(v);
  if (!m) throw badParam(name, value);
  const type = m[1] ?? defaultType;
  return type ? `${type}/${m[2]}` : `*/${m[2]}`;
}

function referenceSql(c: Cond, column: string, refs: string[]): string {
  return refs
    .map((r) =>
      r.startsWith('*/')
        ? `EXISTS (SELECT 1 FROM unnest(${column}) AS x(r) WHERE x.r LIKE ${add(c, `%/${r.slice(2)}`)})`
        : `${column} @> ARRAY[${add(c, r)}]`,
    )
    .join(' OR ');
}

const esc = (s: string): string => s.replace(/[\\%_]/g, (ch) => `\\${ch}`);

/** A token on a `system|code` column (or array): `code`, `system|code`, `|code` (no system) or `system|`. */
function tokenSql(c: Cond, column: string, array: boolean, value: string): string {
  const bar = value.indexOf('|');
  const like =
    bar < 0
      ? `%|${esc(value)}`
      : bar === value.length - 1
        ? `${esc(value.slice(0, bar))}|%`
        : `${esc(value.slice(0, bar))}|${esc(value.slice(bar + 1))}`;
  return array
    ? `EXISTS (SELECT 1 FROM unnest(${column}) AS x(t) WHERE x.t LIKE ${add(c, like)})`
    : `${column} LIKE ${add(c, like)}`;
}

const PREFIX = /^(eq|ne|gt|lt|ge|le|sa|eb|ap)?(.*)$/;

function dateSql(c: Cond, value: string): string {
  const [, prefix = 'eq', rest = ''] = PREFIX.exec(value) ?? [];
  const range = dateRangeMs(rest);
  if (!range) throw badParam('date', value);
  const at = (ms: number) => `${add(c, new Date(ms).toISOString())}::timestamptz`;
  switch (prefix) {
    case 'eq':
    case 'ap':
      return `(recorded >= ${at(range.low)} AND recorded < ${at(range.high)})`;
    case 'ne':
      return `(recorded < ${at(range.low)} OR recorded >= ${at(range.high)})`;
    case 'gt':
    case 'sa':
      return `recorded >= ${at(range.high)}`;
    case 'ge':
      return `recorded >= ${at(range.low)}`;
    case 'lt':
    case 'eb':
      return `recorded < ${at(range.low)}`;
    default:
      return `recorded < ${at(range.high)}`;
  }
}

const IGNORED = new Set(['_format', '_pretty', '_summary', '_elements', '_total']);
const MAX_COUNT = 1000;
const DEFAULT_COUNT = 20;

/** The search of AuditEvents (API.md §10): those the caller may read that match `query`, newest first. */
export async function searchAuditEvents(
  db: Queryable,
  ctx: RepoContext,
  query: Record<string, string | string[] | undefined>,
  selfUrl: string,
  opts: { compartment?: { type: string; id: string }; lenient?: boolean } = {},
): Promise<FhirResult> {
  const reach = auditReach(ctx.actor, ctx.author, 'search');
  const c: Cond = { sql: [], params: [] };
  reachSql(c, reach);
  if (opts.compartment) {
    const ref = `${opts.compartment.type}/${opts.compartment.id}`;
    c.sql.push(
      opts.compartment.type === 'Patient'
        ? `patients @> ARRAY[${add(c, ref)}]`
        : `agents @> ARRAY[${add(c, ref)}]`,
    );
  }
  let count = DEFAULT_COUNT;
  let after: { ms: number; seq: string } | undefined;
  let ascending = false;
  for (const [rawName, raw] of Object.entries(query)) {
    if (raw === undefined) continue;
    const name = rawName.replace(/:(exact|missing|not|text|above|below|identifier)$/, '');
    if (name !== rawName && !opts.lenient)
      throw new FhirError(
        'not-supported',
        `Modifier not supported on AuditEvent: ${rawName}`,
        'audit.modifier',
      );
    for (const value of [raw].flat()) {
      const values = value.split(',').filter((v) => v !== '');
      switch (name) {
        case '_count': {
          const n = Number(value);
          if (!Number.isInteger(n) || n < 0) throw badParam('_count', value);
          count = Math.min(n, MAX_COUNT);
          break;
        }
        case '_cursor': {
          const m = /^(\d{1,16})-(\d{1,19})$/.exec(value);
          if (!m) throw badParam('_cursor', value);
          after = { ms: Number(m[1]), seq: m[2] as string };
          break;
        }
        case '_sort':
          if (value !== 'date' && value !== '-date' && value !== '_lastUpdated' && value !== '-_lastUpdated')
            throw badParam('_sort', value);
          ascending = !value.startsWith('-');
          break;
        case '_id':
          c.sql.push(`id = ANY(${add(c, values)}::text[])`);
          break;
        case 'date':
        case '_lastUpdated':
          c.sql.push(dateSql(c, value));
          break;
        case 'agent':
          c.sql.push(
            `(${referenceSql(
              c,
              'agents',
              values.map((v) => referenceOf(ctx, name, v)),
            )})`,
          );
          break;
        case 'entity':
          c.sql.push(
            `(${referenceSql(
              c,
              'entities',
              values.map((v) => referenceOf(ctx, name, v)),
            )})`,
          );
          break;
        case 'patient':
          c.sql.push(
            `(${referenceSql(
              c,
              'patients',
              values.map((v) => referenceOf(ctx, name, v, 'Patient')),
            )})`,
          );
          break;
        case 'type':
          c.sql.push(`(${values.map((v) => tokenSql(c, 'type', false, v)).join(' OR ')})`);
          break;
        case 'subtype':
          c.sql.push(`(${values.map((v) => tokenSql(c, 'subtype', true, v)).join(' OR ')})`);
          break;
        case 'action':
        case 'outcome':
          c.sql.push(
            `${name} = ANY(${add(
              c,
              values.map((v) => v.replace(/^.*\|/, '')),
            )}::text[])`,
          );
          break;
        default:
          if (IGNORED.has(name) || opts.lenient) break;
          throw new FhirError(
            'invalid',
            `Unknown search parameter for AuditEvent: ${rawName.slice(0, 64)}`,
            'audit.unknown-param',
          );
      }
    }
  }
  if (after !== undefined) {
    const at = `${add(c, new Date(after.ms).toISOString())}::timestamptz`;
    c.sql.push(`(recorded, seq) ${ascending ? '>' : '<'} (${at}, ${add(c, after.seq)}::bigint)`);
  }
  const where = c.sql.length ? `WHERE ${c.sql.join(' AND ')}` : '';
  const rows =
    count === 0
      ? []
      : (
          await db.query<{ seq: string; id: string; content: string; recorded: Date }>(
            `SELECT seq::text AS seq, id, content, recorded FROM audit_events ${where}
             ORDER BY recorded ${ascending ? 'ASC' : 'DESC'}, seq ${ascending ? 'ASC' : 'DESC'} LIMIT ${count + 1}`,
            c.params,
          )
        ).rows;
  const page = rows.slice(0, count);
  const link = [{ relation: 'self', url: selfUrl }];
  if (rows.length > count) {
    const next = new URL(selfUrl);
    const last = page[page.length - 1] as { seq: string; recorded: Date };
    next.searchParams.set('_cursor', `${new Date(last.recorded).getTime()}-${last.seq}`);
    link.push({ relation: 'next', url: next.toString() });
  }
  const text = bundleToJson(
    {
      type: 'searchset',
      link,
      entry: page.map((r) => ({
        fullUrl: `${ctx.fhirBase}/AuditEvent/${r.id}`,
        resource: r.content,
        search: { mode: 'match' },
      })),
    },
    ctx.newId(),
  );
  return { status: 200, body: new RawJson(text) };
}

/** Read (and vread of version 1) of one AuditEvent the caller may read; any other is `404`. */
export async function readAuditEvent(
  db: Queryable,
  ctx: RepoContext,
  id: string,
  versionId?: string,
): Promise<FhirResult> {
  const reach = auditReach(ctx.actor, ctx.author, 'read');
  const notFound = () =>
    new FhirError('not-found', `Not found: AuditEvent/${id.slice(0, 64)}`, 'rest.read.not-found');
  if (!isValidId(id) || (versionId !== undefined && versionId !== '1')) throw notFound();
  const c: Cond = { sql: [], params: [] };
  c.sql.push(`id = ${add(c, id)}`);
  reachSql(c, reach);
  const r = await db.query<{ content: string; recorded: Date }>(
    `SELECT content, recorded FROM audit_events WHERE ${c.sql.join(' AND ')}`,
    c.params,
  );
  const row = r.rows[0];
  if (!row) throw notFound();
  return {
    status: 200,
    body: new RawJson(row.content),
    versionId: '1',
    lastModified: new Date(row.recorded),
  };
}
