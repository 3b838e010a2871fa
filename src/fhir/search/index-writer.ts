// Writes the search index rows of resource versions: one statement per call, whatever the number of resources.
// Each index table gets one INSERT ... SELECT FROM json_to_recordset($n) inside a single WITH statement: JSON text
// is built natively by V8 and read in C by PostgreSQL, ~10x cheaper on the client than node-pg's array literals.
// https://hl7.org/fhir/R4/search.html
import type { Queryable } from '../../storage/db.js';
import type { Resource } from '../types.js';
import { parseJson } from '../json/parse.js';
import { extractAll } from './extract.js';
import type { ExtractedValues } from './extract-composite.js';
import type { IndexValue } from './normalise.js';
import { fullTextWords } from './full-text.js';
import { lastnRows, type LastnRow } from './lastn-index.js';
import { narrowerOf } from './reference-pairs.js';
import { absentIdsOf } from './missing.js';
import { systemKey } from './system-key.js';
import { unionOf } from './union-params.js';

interface Table {
  name: string;
  /** Column list of the INSERT, and the SELECT list over the record `x`. */
  columns: string;
  select: string;
  /** Short JSON keys and their SQL types for json_to_recordset. */
  record: string;
  row: (rid: number, rt: string, code: string, v: never) => Record<string, unknown>;
  /** The table has no `grp` column (composite groups are for the value tables only). */
  noGroup?: boolean;
}

/**
 * Kinds of index rows: one per IndexValue type, the full-text words of a resource (full-text.ts), `$lastn`'s rows
 * of an Observation (lastn-index.ts, migration 020), and the parameters a resource has no value of (missing.ts,
 * migration 028).
 */
type Kind = IndexValue['t'] | 'fulltext' | 'lastn' | 'missing';

const finite = (ms: number): number | string => (Number.isFinite(ms) ? ms : String(ms));

const TABLES: Record<Kind, Table> = {
  string: {
    name: 'sp_string',
    columns: 'rid, resource_type, code, value_norm, value_exact',
    select: 'x.r, x.t, x.c, x.n, x.e',
    record: 'r bigint, t text, c text, n text, e text',
    row: (r, t, c, v: Extract<IndexValue, { t: 'string' }>) => ({ r, t, c, n: v.norm, e: v.exact }),
  },
  token: {
    name: 'sp_token',
    columns: 'rid, resource_type, code, system, value, text_norm',
    select: 'x.r, x.t, x.c, x.s, x.v, x.x',
    record: 'r bigint, t text, c text, s text, v text, x text',
    row: (r, t, c, v: Extract<IndexValue, { t: 'token' }>) => ({
      r,
      t,
      c,
      s: systemKey(v.system),
      v: v.value,
      x: v.text,
    }),
  },
  reference: {
    name: 'sp_reference',
    // The target's type and id are the two parts of `ref` where it names a resource (migration 025).
    columns: 'rid, resource_type, code, ref',
    select: 'x.r, x.t, x.c, x.f',
    record: 'r bigint, t text, c text, f text',
    row: (r, t, c, v: Extract<IndexValue, { t: 'reference' }>) => ({ r, t, c, f: v.ref }),
  },
  date: {
    name: 'sp_date',
    columns: 'rid, resource_type, code, low, high',
    // Epoch milliseconds ('Infinity' for open ends) → timestamptz.
    select: 'x.r, x.t, x.c, to_timestamp(x.l / 1000), to_timestamp(x.h / 1000)',
    record: 'r bigint, t text, c text, l float8, h float8',
    row: (r, t, c, v: Extract<IndexValue, { t: 'date' }>) => ({
      r,
      t,
      c,
      l: finite(v.low),
      h: finite(v.high),
    }),
  },
  number: {
    name: 'sp_number',
    columns: 'rid, resource_type, code, value',
    select: 'x.r, x.t, x.c, x.v',
    record: 'r bigint, t text, c text, v numeric',
    row: (r, t, c, v: Extract<IndexValue, { t: 'number' }>) => ({ r, t, c, v: v.value }),
  },
  quantity: {
    name: 'sp_quantity',
    columns: 'rid, resource_type, code, value, system, unit_code, unit',
    select: 'x.r, x.t, x.c, x.v, x.s, x.u, x.n',
    record: 'r bigint, t text, c text, v numeric, s text, u text, n text',
    row: (r, t, c, v: Extract<IndexValue, { t: 'quantity' }>) => ({
      r,
      t,
      c,
      v: v.value,
      s: systemKey(v.system),
      u: v.code,
      n: v.unit,
    }),
  },
  uri: {
    name: 'sp_uri',
    columns: 'rid, resource_type, code, value',
    select: 'x.r, x.t, x.c, x.v',
    record: 'r bigint, t text, c text, v text',
    row: (r, t, c, v: Extract<IndexValue, { t: 'uri' }>) => ({ r, t, c, v: v.value }),
  },
  identifier: {
    name: 'sp_identifier',
    columns: 'rid, resource_type, code, system, value, type_system, type_code',
    select: 'x.r, x.t, x.c, x.s, x.v, x.ts, x.tc',
    record: 'r bigint, t text, c text, s text, v text, ts text, tc text',
    row: (r, t, c, v: Extract<IndexValue, { t: 'identifier' }>) => ({
      r,
      t,
      c,
      s: systemKey(v.system),
      v: v.value,
      ts: systemKey(v.typeSystem),
      tc: v.typeCode,
    }),
  },
  lastn: {
    name: 'sp_lastn',
    columns: 'rid, subject, category, system, value, effective',
    select: 'x.r, x.s, x.k, x.y, x.v, to_timestamp(x.e / 1000)',
    record: 'r bigint, t text, s text, k text, y text, v text, e float8',
    row: (r, t, _c, v: LastnRow) => ({
      r,
      t,
      s: v.subject,
      k: v.category,
      y: v.system,
      v: v.value,
      e: finite(v.effective),
    }),
    noGroup: true,
  },
  fulltext: {
    name: 'sp_text',
    columns: 'rid, resource_type, narrative, content',
    // Words arrive folded and separated by spaces; each part becomes a tsvector of those words as they are.
    select:
      "x.r, x.t, array_to_tsvector(string_to_array(nullif(x.n, ''), ' ')), " +
      "array_to_tsvector(string_to_array(nullif(x.c, ''), ' '))",
    record: 'r bigint, t text, n text, c text',
    row: (r, t, _c, v: { narrative: string; content: string }) => ({ r, t, n: v.narrative, c: v.content }),
    noGroup: true,
  },
  missing: {
    name: 'sp_missing',
    columns: 'rid, absent',
    select: 'x.r, x.a',
    record: 'r bigint, t text, a smallint[]',
    row: (r, t, _c, v: number[]) => ({ r, t, a: v }),
    noGroup: true,
  },
};

export const INDEX_TABLES = Object.values(TABLES).map((t) => t.name);

type Rows = Map<Kind, Record<string, unknown>[]>;

/**
 * A resource version to index. `index`: values beyond the built-in parameters' (a project's or a shared package's
 * SearchParameters, computed by the caller: search/custom-params.ts), by index code.
 */
export interface IndexItem {
  rid?: number;
  resource: Resource;
  index?: readonly ExtractedValues[];
}

/**
 * `<wider code>\n<ref>` of each reference a narrower parameter indexes for this resource (Observation `patient` for
 * `subject`): the wider parameter's row for it is not written (reference-pairs.ts). Undefined when there is none.
 */
function sharedReferences(resourceType: string, all: readonly ExtractedValues[]): Set<string> | undefined {
  const pairs = narrowerOf(resourceType);
  if (pairs.size === 0) return undefined;
  let out: Set<string> | undefined;
  for (const [wide, narrow] of pairs) {
    for (const { code, values, grp } of all) {
      if (code !== narrow || grp !== undefined) continue;
      for (const v of values) if (v.t === 'reference') (out ??= new Set()).add(`${wide}\n${v.ref}`);
    }
  }
  return out;
}

/** Row kinds of the value tables: a value of one of them is an index row that `:missing` finds. */
const VALUE_KINDS = new Set<string>(['string', 'token', 'reference', 'date', 'number', 'quantity', 'uri']);

/** The codes of the parameters that have a row in their value table (composite components aside). */
function presentCodes(all: readonly ExtractedValues[]): Set<string> {
  const out = new Set<string>();
  for (const { code, values, grp } of all)
    if (grp === undefined && values.some((v) => VALUE_KINDS.has(v.t))) out.add(code);
  return out;
}

/** Index rows of the given resources; `r` holds the rid when known, and `id` the resource id for joins. */
function collectRows(items: readonly IndexItem[]): Rows {
  const rows: Rows = new Map();
  for (const { rid, resource, index } of items) {
    const rt = resource.resourceType;
    const all = index?.length ? [...extractAll(resource), ...index] : extractAll(resource);
    const shared = sharedReferences(rt, all);
    for (const { code, values, grp } of all) {
      // A union of other parameters (`combo-code`): its values are their rows (union-params.ts, migration 027).
      if (grp === undefined && unionOf(rt, code)) continue;
      for (const v of values) {
        // Kept once, under the narrower parameter's code (reference-pairs.ts, migration 025).
        if (shared && v.t === 'reference' && grp === undefined && shared.has(`${code}\n${v.ref}`)) continue;
        let list = rows.get(v.t);
        if (!list) rows.set(v.t, (list = []));
        const row = TABLES[v.t].row(rid ?? 0, rt, code, v as never);
        if (grp !== undefined) {
          row.g = grp;
          // A composite's token component is never searched by `:text` (migration 025).
          if (v.t === 'token') row.x = null;
        }
        if (rid === undefined) row.id = resource.id;
        list.push(row);
      }
    }
    const lastn = lastnRows(resource as Record<string, unknown>, all);
    if (lastn.length > 0) {
      let list = rows.get('lastn');
      if (!list) rows.set('lastn', (list = []));
      for (const v of lastn) {
        const row = TABLES.lastn.row(rid ?? 0, rt, '', v as never);
        if (rid === undefined) row.id = resource.id;
        list.push(row);
      }
    }
    const absent = absentIdsOf(rt, presentCodes(all));
    if (absent.length > 0) {
      const row = TABLES.missing.row(rid ?? 0, rt, '', absent as never);
      if (rid === undefined) row.id = resource.id;
      let list = rows.get('missing');
      if (!list) rows.set('missing', (list = []));
      list.push(row);
    }
    const text = TABLES.fulltext.row(rid ?? 0, rt, '', fullTextWords(resource) as never);
    if (rid === undefined) text.id = resource.id;
    let list = rows.get('fulltext');
    if (!list) rows.set('fulltext', (list = []));
    list.push(text);
  }
  return rows;
}

/**
 * The INSERT statements of the rows, binding their JSON as parameters appended to `params`. With `join`, rids come
 * from that CTE (`rid, resource_type, id` of rows inserted in the same statement) instead of the rows themselves.
 */
function insertParts(rows: Rows, params: unknown[], join?: string): string[] {
  const parts: string[] = [];
  for (const [kind, list] of rows) {
    const t = TABLES[kind];
    params.push(JSON.stringify(list));
    // `grp` (composite components only, see extract-composite.ts) is null on every other row.
    const source = `json_to_recordset($${params.length}::json) AS x(${t.record}, g int${join ? ', id text' : ''})`;
    const columns = t.noGroup ? t.columns : `${t.columns}, grp`;
    const select = t.noGroup ? t.select : `${t.select}, x.g`;
    parts.push(
      join
        ? `INSERT INTO ${t.name} (${columns}) SELECT ${select.replace('x.r,', 'k.rid,')} FROM ${source} JOIN ${join} k ON k.resource_type = x.t AND k.id = x.id`
        : `INSERT INTO ${t.name} (${columns}) SELECT ${select} FROM ${source}`,
    );
  }
  return parts;
}

/**
 * CTEs that index resources inserted by the CTE named `join` of the same statement (see insertResources): one
 * round trip writes a resource, its history and its index. Parameters are appended to `params`.
 */
export function indexCtes(items: readonly IndexItem[], params: unknown[], join: string): string[] {
  return insertParts(collectRows(items), params, join).map((p, i) => `idx${i} AS (${p})`);
}

/**
 * CTEs that replace the index rows of one resource (`rid`) by those of `resource` (none when null, a delete).
 * The deletes see only the rows from before the statement, so deleting and inserting in one statement is safe.
 */
export function replaceIndexCtes(
  rid: number,
  resource: Resource | null,
  params: unknown[],
  index?: readonly ExtractedValues[],
): string[] {
  params.push(rid);
  const ridParam = `$${params.length}::bigint`;
  const deletes = INDEX_TABLES.map((tbl, i) => `del${i} AS (DELETE FROM ${tbl} WHERE rid = ${ridParam})`);
  const inserts = resource
    ? insertParts(collectRows([{ rid, resource, ...(index ? { index } : {}) }]), params)
    : [];
  return [...deletes, ...inserts.map((p, i) => `idx${i} AS (${p})`)];
}

/** Writes the index rows of the given (new) resource versions; the caller has deleted older rows of these rids. */
export async function writeIndex(
  tx: Queryable,
  items: readonly (IndexItem & { rid: number })[],
): Promise<void> {
  if (items.length === 0) return;
  const params: unknown[] = [];
  const parts = insertParts(collectRows(items), params);
  if (parts.length === 0) return;
  const ctes = parts.slice(0, -1).map((p, i) => `w${i} AS (${p})`);
  await tx.query(
    ctes.length ? `WITH ${ctes.join(', ')} ${parts[parts.length - 1]}` : (parts[0] as string),
    params,
    { prepare: true },
  );
}

/** Removes every index row of the given rids (one statement). */
export async function deleteIndex(tx: Queryable, rids: readonly number[]): Promise<void> {
  if (rids.length === 0) return;
  const ctes = INDEX_TABLES.slice(0, -1).map(
    (tbl, i) => `d${i} AS (DELETE FROM ${tbl} WHERE rid = ANY($1::bigint[]))`,
  );
  await tx.query(
    `WITH ${ctes.join(', ')} DELETE FROM ${INDEX_TABLES[INDEX_TABLES.length - 1]} WHERE rid = ANY($1::bigint[])`,
    [rids],
    { prepare: true },
  );
}

/**
 * Rebuilds the index rows of the given rids from their stored content (for `$reindex`): deleted rows get none.
 * Returns the number of resources indexed. Run it inside a transaction.
 */
export async function reindexResources(
  tx: Queryable,
  rids: readonly number[],
  extra?: ExtraIndex,
): Promise<number> {
  if (rids.length === 0) return 0;
  await lockIndexRewrites(tx);
  const r = await tx.query<{ rid: number; json: string; project_id: string }>(
    'SELECT rid, project_id, content::text AS json FROM resources WHERE rid = ANY($1::bigint[]) AND NOT deleted',
    [rids],
  );
  const items: (IndexItem & { rid: number })[] = r.rows.map((row) => ({
    rid: Number(row.rid),
    resource: parseJson(row.json) as Resource,
  }));
  if (extra) {
    const index = await extra(
      tx,
      r.rows.map((row, i) => ({ projectId: row.project_id, resource: items[i]!.resource })),
    );
    index.forEach((values, i) => {
      if (values.length) (items[i] as IndexItem).index = values;
    });
  }
  await deleteIndex(tx, rids);
  await writeIndex(tx, items);
  return r.rows.length;
}

/** The values beyond the built-in parameters' of each resource (in order), for reindexResources. */
export type ExtraIndex = (
  tx: Queryable,
  resources: readonly { projectId: string; resource: Resource }[],
) => Promise<readonly (readonly ExtractedValues[])[]>;

/** Key of the transaction advisory lock that `$reindex` batches and index backfill batches take (see below). */
const INDEX_REWRITE_LOCK = 72_410_023;

/**
 * Serialises, until the end of the transaction, the background rewrites of stored resources' index rows (`$reindex`
 * and the index backfill, on every instance): two of them on the same resource at once would each delete the rows
 * they see and both insert theirs, leaving the rows twice.
 */
export async function lockIndexRewrites(tx: Queryable): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock($1)', [INDEX_REWRITE_LOCK]);
}

/**
 * Rewrites only the rows of the named index tables for the given resource versions (the index backfill after an
 * upgrade, src/jobs/index-backfill.ts): their other tables are left as they are. One statement.
 */
export async function rewriteIndexTables(
  tx: Queryable,
  items: readonly (IndexItem & { rid: number })[],
  tables: readonly string[],
): Promise<void> {
  if (items.length === 0) return;
  for (const t of tables) if (!INDEX_TABLES.includes(t)) throw new Error(`not an index table: ${t}`);
  const rows = collectRows(items);
  for (const kind of [...rows.keys()]) if (!tables.includes(TABLES[kind].name)) rows.delete(kind);
  const params: unknown[] = [items.map((i) => i.rid)];
  const deletes = tables.map((tbl, i) => `d${i} AS (DELETE FROM ${tbl} WHERE rid = ANY($1::bigint[]))`);
  const inserts = insertParts(rows, params).map((p, i) => `w${i} AS (${p})`);
  await tx.query(`WITH ${[...deletes, ...inserts].join(', ')} SELECT 1`, params);
}
