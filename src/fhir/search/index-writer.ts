// Writes the search index rows of resource versions: one statement per call, whatever the number of resources
// (each index table gets one INSERT ... SELECT FROM unnest(arrays) inside a single WITH statement).
// https://hl7.org/fhir/R4/search.html
import type { Queryable } from '../../storage/db.js';
import type { Resource } from '../types.js';
import { extractAll } from './extract.js';

interface Columns {
  table: string;
  columns: string[];
  types: string[];
  data: unknown[][];
}

function tables(): Record<string, Columns> {
  const t = (table: string, cols: [string, string][]): Columns => ({
    table,
    columns: ['rid', 'resource_type', 'code', ...cols.map((c) => c[0])],
    types: ['bigint', 'text', 'text', ...cols.map((c) => c[1])],
    data: [[], [], [], ...cols.map(() => [])],
  });
  return {
    string: t('sp_string', [
      ['value_norm', 'text'],
      ['value_exact', 'text'],
    ]),
    token: t('sp_token', [
      ['system', 'text'],
      ['value', 'text'],
      ['text_norm', 'text'],
    ]),
    reference: t('sp_reference', [
      ['target_type', 'text'],
      ['target_id', 'text'],
      ['ref', 'text'],
    ]),
    date: t('sp_date', [
      ['low', 'timestamptz'],
      ['high', 'timestamptz'],
    ]),
    number: t('sp_number', [['value', 'numeric']]),
    quantity: t('sp_quantity', [
      ['value', 'numeric'],
      ['system', 'text'],
      ['unit_code', 'text'],
      ['unit', 'text'],
    ]),
    uri: t('sp_uri', [['value', 'text']]),
  };
}

export const INDEX_TABLES = [
  'sp_string',
  'sp_token',
  'sp_reference',
  'sp_date',
  'sp_number',
  'sp_quantity',
  'sp_uri',
];

/** Writes the index rows of the given (new) resource versions; the caller has deleted older rows of these rids. */
export async function writeIndex(
  tx: Queryable,
  items: readonly { rid: number; resource: Resource }[],
): Promise<void> {
  if (items.length === 0) return;
  const t = tables();
  for (const { rid, resource } of items) {
    const rt = resource.resourceType;
    for (const { code, values } of extractAll(resource)) {
      for (const v of values) {
        const cols = t[v.t] as Columns;
        const d = cols.data;
        (d[0] as unknown[]).push(rid);
        (d[1] as unknown[]).push(rt);
        (d[2] as unknown[]).push(code);
        switch (v.t) {
          case 'string':
            (d[3] as unknown[]).push(v.norm);
            (d[4] as unknown[]).push(v.exact);
            break;
          case 'token':
            (d[3] as unknown[]).push(v.system);
            (d[4] as unknown[]).push(v.value);
            (d[5] as unknown[]).push(v.text);
            break;
          case 'reference':
            (d[3] as unknown[]).push(v.targetType);
            (d[4] as unknown[]).push(v.targetId);
            (d[5] as unknown[]).push(v.ref);
            break;
          case 'date':
            (d[3] as unknown[]).push(v.low);
            (d[4] as unknown[]).push(v.high);
            break;
          case 'number':
            (d[3] as unknown[]).push(v.value);
            break;
          case 'quantity':
            (d[3] as unknown[]).push(v.value);
            (d[4] as unknown[]).push(v.system);
            (d[5] as unknown[]).push(v.code);
            (d[6] as unknown[]).push(v.unit);
            break;
          case 'uri':
            (d[3] as unknown[]).push(v.value);
            break;
        }
      }
    }
  }
  const parts: string[] = [];
  const params: unknown[] = [];
  for (const cols of Object.values(t)) {
    if ((cols.data[0] as unknown[]).length === 0) continue;
    const args = cols.data.map((arr, i) => {
      params.push(arr);
      return `$${params.length}::${cols.types[i]}[]`;
    });
    parts.push(
      `INSERT INTO ${cols.table} (${cols.columns.join(', ')}) SELECT * FROM unnest(${args.join(', ')})`,
    );
  }
  if (parts.length === 0) return;
  if (parts.length === 1) {
    await tx.query(parts[0] as string, params);
    return;
  }
  const ctes = parts.slice(0, -1).map((p, i) => `w${i} AS (${p})`);
  await tx.query(`WITH ${ctes.join(', ')} ${parts[parts.length - 1]}`, params);
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
  );
}

/**
 * Rebuilds the index rows of the given rids from their stored content (for `$reindex`): deleted rows get none.
 * Returns the number of resources indexed. Run it inside a transaction.
 */
export async function reindexResources(tx: Queryable, rids: readonly number[]): Promise<number> {
  if (rids.length === 0) return 0;
  const r = await tx.query<{ rid: number; json: string }>(
    'SELECT rid, content::text AS json FROM resources WHERE rid = ANY($1::bigint[]) AND NOT deleted',
    [rids],
  );
  await deleteIndex(tx, rids);
  await writeIndex(
    tx,
    r.rows.map((row) => ({ rid: Number(row.rid), resource: JSON.parse(row.json) as Resource })),
  );
  return r.rows.length;
}
