// SearchRequest → SQL, pure. Every value is a bind parameter; only table/column names chosen here appear as text.
// Matching rules: https://hl7.org/fhir/R4/search.html (string prefix, token forms, date ranges and prefixes, ...).
import type { AccessScope } from '../types.js';
import { FhirError } from '../outcome.js';
import { resourceTypes } from './model.js';
import { normaliseString, uriAncestors, uriBelow } from './normalise.js';
import { fullTextCondition, isFullTextFilter } from './full-text.js';
import { patientCondition, referencedBy } from './patient-reach.js';
import { narrowerOf, withNarrower } from './reference-pairs.js';
import { absentIdOf, MISSING_TABLE, otherTokenRanges } from './missing.js';
import { compositeSources, type CompositeSource } from './composite-sources.js';
import { systemKey } from './system-key.js';
import { unionOf } from './union-params.js';
import type {
  FilterExpr,
  FilterValue,
  IncludeSpec,
  Prefix,
  SearchFilter,
  SearchRequest,
  SortKey,
} from './request.js';

export interface SqlQuery {
  text: string;
  values: unknown[];
}

const TABLE: Record<string, string> = {
  string: 'sp_string',
  token: 'sp_token',
  reference: 'sp_reference',
  date: 'sp_date',
  number: 'sp_number',
  quantity: 'sp_quantity',
  uri: 'sp_uri',
};

/** The index table a filter reads: `:of-type` and reference `:identifier` read the identifier rows (migration 017). */
function tableOf(f: SearchFilter): string {
  if (f.modifier === 'of-type' || f.modifier === 'identifier') return 'sp_identifier';
  return TABLE[f.type] as string;
}

class Builder {
  readonly values: unknown[] = [];
  private aliases = 0;

  /** `bind`: values go to a query built elsewhere (matchCondition), which returns their placeholders. */
  constructor(private readonly bind?: (v: unknown) => string) {}

  /** Binds a value; returns its placeholder (with a cast when given). */
  p(v: unknown, cast?: string): string {
    const placeholder = this.bind ? this.bind(v) : `$${this.values.push(v)}`;
    return cast ? `${placeholder}::${cast}` : placeholder;
  }

  alias(prefix: string): string {
    return `${prefix}${++this.aliases}`;
  }
}

/** `%`, `_` and `\` are LIKE metacharacters; escape them so user text only ever matches itself. */
export function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/**
 * `col` starts with `prefix`, written as a byte-wise range (`~>=~`/`~<~`, the text_pattern_ops operators) rather
 * than LIKE: PostgreSQL cannot turn `LIKE $n` into an index range in a generic (prepared) plan, but it can use
 * these comparisons. U+10FFFF is the largest code point, so `prefix || U+10FFFF` bounds every extension.
 */
function startsWith(b: Builder, col: string, prefix: string): string {
  return `(${col} ~>=~ ${b.p(prefix)} AND ${col} ~<~ ${b.p(`${prefix}\u{10FFFF}`)})`;
}

/**
 * Part `n` (1: type, 2: id) of a reference row's target: where a reference names a resource, `ref` is `<type>/<id>`
 * (migration 025 keeps only `ref`).
 */
function refPart(b: Builder, x: string, n: 1 | 2): string {
  return `split_part(${x}.ref, ${b.p('/')}, ${n})`;
}

/**
 * The row's `ref` has at most one slash, as `<type>/<id>` has: any other text kept (an absolute URL, a logical
 * reference) then has parts that are no resource type or id, so its parts match no resource.
 */
function oneSlash(b: Builder, x: string): string {
  return `${x}.ref NOT LIKE ${b.p('%/%/%')}`;
}

/**
 * The row is one of parameter `code`'s, of `table` for resources of `types` (`*`: any type). A reference parameter
 * that a narrower one shares rows with (Observation `subject` and `patient`: reference-pairs.ts, migration 025) has
 * its rows under both codes; over several types, the narrower code counts only for the types where it is narrower.
 */
function codeIs(b: Builder, x: string, table: string, types: Types | '*', code: string): string {
  // Bound only where used: a parameter the text does not use has no type, and the statement fails.
  const plain = (): string => `${x}.code = ${b.p(code)}`;
  const list = types === '*' ? [...resourceTypes()] : typeof types === 'string' ? [types] : types;
  if (table !== 'sp_reference') return unionCodeIs(b, x, list, code, typeof types === 'string') ?? plain();
  const byNarrow = new Map<string, string[]>();
  for (const t of list) {
    const narrow = narrowerOf(t).get(code);
    if (narrow) byNarrow.set(narrow, [...(byNarrow.get(narrow) ?? []), t]);
  }
  if (byNarrow.size === 0) return plain();
  if (typeof types === 'string') return `${x}.code = ANY(${b.p([code, ...byNarrow.keys()], 'text[]')})`;
  const alts = [...byNarrow].map(
    ([narrow, ts]) => `(${x}.code = ${b.p(narrow)} AND ${typeIs(b, `${x}.resource_type`, ts)})`,
  );
  return `(${[plain(), ...alts].join(' OR ')})`;
}

/** The resource type(s) a condition is about: one, or the group of a system-level search (search-system.ts). */
type Types = string | readonly string[];

/**
 * The codes of a union parameter's rows (`combo-code`: `code` and `component-code`, union-params.ts, migration 027),
 * for the types where it is one (over several types, the others keep their own code); undefined where it is none.
 */
function unionCodeIs(
  b: Builder,
  x: string,
  types: readonly string[],
  code: string,
  oneType: boolean,
): string | undefined {
  const byParts = new Map<string, { parts: readonly string[]; types: string[] }>();
  for (const t of types) {
    const parts = unionOf(t, code);
    if (!parts) continue;
    const key = parts.join(' ');
    const g = byParts.get(key);
    if (g) g.types.push(t);
    else byParts.set(key, { parts, types: [t] });
  }
  if (byParts.size === 0) return undefined;
  const only = [...byParts.values()][0] as { parts: readonly string[] };
  if (oneType) return `${x}.code = ANY(${b.p(only.parts, 'text[]')})`;
  const alts = [...byParts.values()].map(
    (g) => `(${x}.code = ANY(${b.p(g.parts, 'text[]')}) AND ${typeIs(b, `${x}.resource_type`, g.types)})`,
  );
  return `(${[`${x}.code = ${b.p(code)}`, ...alts].join(' OR ')})`;
}

/** `col` is the type, or one of the types. */
function typeIs(b: Builder, col: string, t: Types): string {
  return typeof t === 'string' ? `${col} = ${b.p(t)}` : `${col} = ANY(${b.p(t, 'text[]')})`;
}

function or(conds: string[]): string {
  if (conds.length === 0) return 'FALSE';
  return conds.length === 1 ? (conds[0] as string) : `(${conds.join(' OR ')})`;
}

/** Binds a value the first time the condition text uses it (an unused parameter has no type and fails). */
function lazy(b: Builder, v: unknown, cast: string): { toString(): string } {
  let placeholder: string | undefined;
  return { toString: () => (placeholder ??= b.p(v, cast)) };
}

type Bound = { toString(): string };

/** Conditions on a [low, high) range against a search range [vl, vh) (https://hl7.org/fhir/R4/search.html#prefix). */
function rangeCondition(prefix: Prefix, low: string, high: string, vl: Bound, vh: Bound): string {
  switch (prefix) {
    case 'eq':
      return `(${low} >= ${vl} AND ${high} <= ${vh})`;
    case 'ne':
      return `(${low} < ${vl} OR ${high} > ${vh})`;
    case 'gt':
      return `${high} > ${vh}`;
    case 'lt':
      return `${low} < ${vl}`;
    case 'ge':
      return `(${high} > ${vh} OR (${low} >= ${vl} AND ${high} <= ${vh}))`;
    case 'le':
      return `(${low} < ${vl} OR (${low} >= ${vl} AND ${high} <= ${vh}))`;
    case 'sa':
      return `${low} >= ${vh}`;
    case 'eb':
      return `${high} <= ${vl}`;
    case 'ap':
      return `(${low} < ${vh} AND ${high} > ${vl})`;
  }
}

/** The same for a single instant column t, read as [t, t]. */
function pointCondition(prefix: Prefix, t: string, vl: Bound, vh: Bound): string {
  switch (prefix) {
    case 'eq':
    case 'ap':
      return `(${t} >= ${vl} AND ${t} < ${vh})`;
    case 'ne':
      return `(${t} < ${vl} OR ${t} >= ${vh})`;
    case 'gt':
    case 'sa':
      return `${t} >= ${vh}`;
    case 'lt':
    case 'eb':
      return `${t} < ${vl}`;
    case 'ge':
      return `${t} >= ${vl}`;
    case 'le':
      return `${t} < ${vh}`;
  }
}

function numberCondition(v: Extract<FilterValue, { kind: 'number' }>, col: string, b: Builder): string {
  const n = (x: string): string => b.p(x, 'numeric');
  switch (v.prefix) {
    case 'eq':
      return `(${col} >= ${n(v.low)} AND ${col} < ${n(v.high)})`;
    case 'ne':
      return `(${col} < ${n(v.low)} OR ${col} >= ${n(v.high)})`;
    case 'gt':
    case 'sa':
      return `${col} > ${n(v.value)}`;
    case 'lt':
    case 'eb':
      return `${col} < ${n(v.value)}`;
    case 'ge':
      return `${col} >= ${n(v.value)}`;
    case 'le':
      return `${col} <= ${n(v.value)}`;
    case 'ap':
      return `(${col} >= ${n(v.apLow)} AND ${col} <= ${n(v.apHigh)})`;
  }
}

function valueCondition(f: SearchFilter, v: FilterValue, x: string, b: Builder): string {
  switch (v.kind) {
    case 'string': {
      const norm = normaliseString(v.value);
      if (v.match === 'eq') return `${x}.value_norm = ${b.p(norm)}`;
      if (v.match === 'ew') return `${x}.value_norm LIKE ${b.p(`%${escapeLike(norm)}`)}`;
      if (f.modifier === 'exact')
        return `(${x}.value_norm = ${b.p(norm)} AND ${x}.value_exact = ${b.p(v.value)})`;
      if (f.modifier !== 'contains') return startsWith(b, `${x}.value_norm`, norm);
      return `${x}.value_norm LIKE ${b.p(`%${escapeLike(norm)}%`)}`;
    }
    case 'token': {
      const conds: string[] = [];
      if (v.system === '') conds.push(`${x}.system IS NULL`);
      else if (v.system !== undefined) conds.push(`${x}.system = ${b.p(systemKey(v.system))}`);
      if (v.code !== undefined) conds.push(`${x}.value = ${b.p(v.code)}`);
      return conds.length ? `(${conds.join(' AND ')})` : 'TRUE';
    }
    case 'text':
      // A byte range, as strings: the sp_token_text index answers it (migrations 019, 025: rows of no composite).
      return `(${startsWith(b, `${x}.text_norm`, normaliseString(v.value))} AND ${x}.grp IS NULL)`;
    case 'reference':
      return v.refs.length ? `${x}.ref = ANY(${b.p(v.refs, 'text[]')})` : 'FALSE';
    case 'reference-id':
      // An id of any type (a parameter without target types): `<type>/<id>` for each type, as the index holds it.
      return `${x}.ref = ANY(${b.p(
        [...resourceTypes()].map((t) => `${t}/${v.id}`),
        'text[]',
      )})`;
    case 'date':
      return rangeCondition(
        v.prefix,
        `${x}.low`,
        `${x}.high`,
        lazy(b, v.low, 'timestamptz'),
        lazy(b, v.high, 'timestamptz'),
      );
    case 'number': {
      const conds = [numberCondition(v, `${x}.value`, b)];
      if (v.system) conds.push(`${x}.system = ${b.p(systemKey(v.system))}`);
      if (v.unit) {
        const u = b.p(v.unit);
        conds.push(v.system ? `${x}.unit_code = ${u}` : `(${x}.unit_code = ${u} OR ${x}.unit = ${u})`);
      }
      return `(${conds.join(' AND ')})`;
    }
    case 'uri':
      if (f.modifier === 'below') {
        const { equal, prefix } = uriBelow(v.value);
        return `(${x}.value = ANY(${b.p(equal, 'text[]')}) OR ${startsWith(b, `${x}.value`, prefix)})`;
      }
      // The value's ancestors on path segment boundaries, looked up by equality in the value index.
      if (f.modifier === 'above') return `${x}.value = ANY(${b.p(uriAncestors(v.value), 'text[]')})`;
      return `${x}.value = ${b.p(v.value)}`;
    case 'codes': {
      // One probe of the value index per (system, code) pair of the resolved value set or hierarchy.
      const pairs =
        `(${x}.value, ${x}.system) IN (SELECT u.c, u.s FROM unnest(${b.p(v.codes, 'text[]')}, ` +
        `${b.p(v.systems.map(systemKey), 'text[]')}) AS u(c, s))`;
      // A `code` element's value has no system of its own: the code decides.
      if (!v.codeOnly) return pairs;
      return `(${pairs} OR (${x}.system IS NULL AND ${x}.value = ANY(${b.p(v.codes, 'text[]')})))`;
    }
    case 'of-type':
      return (
        `(${x}.value = ${b.p(v.value)} AND ${x}.type_code = ${b.p(v.typeCode)} ` +
        `AND ${x}.type_system = ${b.p(systemKey(v.typeSystem))})`
      );
    case 'identifier':
      return valueCondition(f, { kind: 'token', system: v.system, code: v.value }, x, b);
    case 'value-set':
    case 'hierarchy':
      // parse.ts refuses these unless the caller resolves them first (search/terminology.ts).
      throw new FhirError(
        'exception',
        `Unresolved :${f.modifier ?? ''} on '${f.code}'`,
        'search.unresolved-terminology',
      );
    case 'composite':
      return 'FALSE'; // answered by compositeCondition
    case 'fulltext':
      return 'FALSE'; // answered by fullTextCondition
  }
}

/**
 * A composite value (https://hl7.org/fhir/R4/search.html#composite): its components found on one element. Read from
 * the composite's own rows (one per component, code `<param>$<k>`, all of the same element `grp`, written by
 * extract-composite.ts), or where composite-sources.ts says so from the resource's ordinary rows and another
 * composite's rows. Types whose composite reads the same rows share one query.
 */
function compositeCondition(
  resourceType: Types,
  code: string,
  v: Extract<FilterValue, { kind: 'composite' }>,
  b: Builder,
): string {
  const groups = new Map<string, { sources: readonly CompositeSource[]; types: string[] }>();
  for (const t of typeof resourceType === 'string' ? [resourceType] : resourceType) {
    const sources = compositeSources(t, code) ?? [{ rows: code }];
    const key = JSON.stringify(sources);
    const g = groups.get(key);
    if (g) g.types.push(t);
    else groups.set(key, { sources, types: [t] });
  }
  const alts: string[] = [];
  for (const { sources, types } of groups.values()) {
    const ts: Types = groups.size === 1 ? resourceType : types.length === 1 ? (types[0] as string) : types;
    for (const s of sources)
      alts.push('rows' in s ? compositeRows(ts, s.rows, v, b) : ordinaryComponents(ts, s.ordinary, v, b));
  }
  return alts.join(' UNION ALL ');
}

/** The composite `code`'s own rows: each component under `<code>$<k>`, all of one element (`grp`). */
function compositeRows(
  resourceType: Types,
  code: string,
  v: Extract<FilterValue, { kind: 'composite' }>,
  b: Builder,
): string {
  return componentsJoin(resourceType, v, b, {
    sameElement: (x, first) => ` AND ${x}.grp = ${first}.grp`,
    code: (k, x) => ({ name: part(v, k).code, cond: `${x}.code = ${b.p(`${code}$${k}`)}` }),
  });
}

/** Components on the resource itself: the ordinary rows of the parameters `codes` (one per component), by rid. */
function ordinaryComponents(
  resourceType: Types,
  codes: readonly string[],
  v: Extract<FilterValue, { kind: 'composite' }>,
  b: Builder,
): string {
  return componentsJoin(resourceType, v, b, {
    sameElement: () => '',
    code: (k, x) => {
      const name = codes[k] as string;
      const table = TABLE[part(v, k).type] as string;
      return { name, cond: codeIs(b, x, table, resourceType, name) };
    },
  });
}

const part = (v: Extract<FilterValue, { kind: 'composite' }>, k: number) =>
  v.parts[k] as (typeof v.parts)[number];

/**
 * One row per component joined by rid (and by `sameElement`), each row of its component's code (`code(k, alias)`: the
 * parameter whose value condition applies, and the SQL that picks its rows) matching the component's value.
 */
function componentsJoin(
  resourceType: Types,
  v: Extract<FilterValue, { kind: 'composite' }>,
  b: Builder,
  how: {
    sameElement: (x: string, first: string) => string;
    code: (k: number, x: string) => { name: string; cond: string };
  },
): string {
  const aliases = v.parts.map(() => b.alias('k'));
  const first = aliases[0] as string;
  const from = v.parts
    .map((p, k) => {
      const x = aliases[k] as string;
      const table = `${TABLE[p.type] as string} ${x}`;
      return k === 0 ? table : `JOIN ${table} ON ${x}.rid = ${first}.rid${how.sameElement(x, first)}`;
    })
    .join(' ');
  const conds = v.parts.map((p, k) => {
    const x = aliases[k] as string;
    const { name, cond } = how.code(k, x);
    const sub: SearchFilter = { code: name, type: p.type, values: [p.value] };
    return `${typeIs(b, `${x}.resource_type`, resourceType)} AND ${cond} AND ${valueCondition(sub, p.value, x, b)}`;
  });
  return `SELECT ${first}.rid FROM ${from} WHERE ${conds.join(' AND ')}`;
}

function columnCondition(f: SearchFilter, a: string, b: Builder): string {
  if (f.column === 'id') {
    const ids = f.values.flatMap((v) => (v.kind === 'token' && v.code !== undefined ? [v.code] : []));
    return f.modifier === 'not'
      ? `${a}.id <> ALL(${b.p(ids, 'text[]')})`
      : `${a}.id = ANY(${b.p(ids, 'text[]')})`;
  }
  return or(
    f.values.map((v) =>
      v.kind === 'date'
        ? pointCondition(
            v.prefix,
            `${a}.last_updated`,
            lazy(b, v.low, 'timestamptz'),
            lazy(b, v.high, 'timestamptz'),
          )
        : 'FALSE',
    ),
  );
}

/**
 * A `_filter` expression: its leaves' conditions under `and`, `or` and `not`. Leaves AND'ed at the top are semi-joins
 * as ordinary filters are; under `or` and `not` they are probes of the row's own index rows (`correlated`): PostgreSQL
 * turns neither an OR'ed nor a negated `rid IN (subquery)` into a join, and would otherwise hash every matching
 * index row of the whole table (every project's), or re-run the subquery per row when they do not fit in memory.
 */
function exprCondition(
  resourceType: Types,
  e: FilterExpr,
  a: string,
  b: Builder,
  scope: AccessScope,
  top = true,
): string {
  if (e.op === 'leaf') return filterCondition(resourceType, e.filter, a, b, scope, !top);
  if (e.op === 'not') return `NOT (${exprCondition(resourceType, e.arg, a, b, scope, false)})`;
  const parts = e.args.map((x) => exprCondition(resourceType, x, a, b, scope, top && e.op === 'and'));
  return `(${parts.join(e.op === 'and' ? ' AND ' : ' OR ')})`;
}

function filterCondition(
  resourceType: Types,
  f: SearchFilter,
  a: string,
  b: Builder,
  scope: AccessScope,
  correlated = false,
): string {
  if (f.expr) return exprCondition(resourceType, f.expr, a, b, scope);
  if (f.column) return columnCondition(f, a, b);
  if (isFullTextFilter(f)) return fullTextCondition(resourceType, f, a, (v) => b.p(v));
  const table = tableOf(f);
  const x = b.alias('x');
  // Positive tests are `rid IN (uncorrelated subquery)` (planned a little faster than EXISTS); negative ones stay
  // NOT EXISTS, an anti-join that scales where NOT IN would need the whole subquery in memory.
  if (f.chain) {
    // Joined on the reference text (`Type/id`), which the sp_reference_ref index answers per target found.
    const t = b.alias('t');
    const { targetType, filter } = f.chain;
    const tt = b.p(targetType);
    const conds = [
      typeIs(b, `${x}.resource_type`, resourceType),
      codeIs(b, x, 'sp_reference', resourceType, f.code),
      `NOT ${t}.deleted`,
      ...(scope.projectId !== null ? [`${t}.project_id = ${b.p(scope.projectId)}`] : []),
      ...optional(patientCondition(scope, t, (v) => b.p(v), targetType)),
      filterCondition(targetType, filter, t, b, scope),
    ];
    return (
      `${a}.rid IN (SELECT ${x}.rid FROM resources ${t} JOIN sp_reference ${x} ON ${x}.ref = ${tt} || '/' || ${t}.id ` +
      `WHERE ${t}.resource_type = ${tt} AND ${conds.join(' AND ')})`
    );
  }
  if (f.has) {
    // The referenced ids, found from the referring resources (their project's, when scoped).
    const s = b.alias('h');
    const { sourceType, code, filter } = f.has;
    const conds = [
      `${x}.resource_type = ${b.p(sourceType)}`,
      codeIs(b, x, 'sp_reference', sourceType, code),
      `NOT ${s}.deleted`,
      ...(scope.projectId !== null ? [`${s}.project_id = ${b.p(scope.projectId)}`] : []),
      ...optional(patientCondition(scope, s, (v) => b.p(v), sourceType)),
      filterCondition(sourceType, filter, s, b, scope),
    ];
    // A semi-join on both the reference text and the target id, so that the planner may start from either side, the
    // smaller one: from the referring resources (a rare `code=`: their targets found by type and id), or from this
    // search's own rows in page order, each probing the sp_reference_ref index with its `Type/id` (a broad `code=`
    // that nearly every patient has: a page reads a few referrers per row rather than every referrer). Over several
    // types (a system search), the type is matched by the reference text: ids are unique within a type only. (The
    // text equality also keeps out references of another shape: an id holds no slash.)
    const type = typeof resourceType === 'string' ? b.p(resourceType) : `${a}.resource_type`;
    conds.push(`${x}.ref = ${type} || '/' || ${a}.id`);
    return `EXISTS (SELECT 1 FROM sp_reference ${x} JOIN resources ${s} ON ${s}.rid = ${x}.rid WHERE ${conds.join(' AND ')})`;
  }
  if (f.type === 'composite') {
    const alts = f.values.flatMap((v) =>
      v.kind === 'composite' ? [compositeCondition(resourceType, f.code, v, b)] : [],
    );
    return `${a}.rid IN (${alts.join(' UNION ALL ')})`;
  }
  const ofParam = (y: string): string =>
    `${typeIs(b, `${y}.resource_type`, resourceType)} AND ${codeIs(b, y, table, resourceType, f.code)}`;
  const candidates = f.fromCandidates && !correlated ? candidatesOf(resourceType, f, b) : undefined;
  if (f.missing !== undefined) {
    // With the type, the value index (type, code, ...) answers the rows of the parameter on its own: `:missing=false`
    // on a parameter nobody has is an empty index range, whatever the table's size.
    const any = `EXISTS (SELECT 1 FROM ${table} ${x} WHERE ${x}.rid = ${a}.rid AND ${ofParam(x)})`;
    if (!f.missing) return any;
    // Few resources without a value (missing-plan.ts): found in sp_missing, each checked by its own rows.
    return candidates ? `${a}.rid IN (${candidates}) AND NOT ${any}` : `NOT ${any}`;
  }
  const test = `${ofParam(x)} AND ${or(f.values.map((v) => valueCondition(f, v, x, b)))}`;
  if (f.modifier === 'not' || f.modifier === 'not-in') {
    const none = `NOT EXISTS (SELECT 1 FROM ${table} ${x} WHERE ${x}.rid = ${a}.rid AND ${test})`;
    // Few candidates (another value, or none; missing-plan.ts): the search starts from them, and a resource with
    // the value among others is ruled out by its own rows.
    return candidates ? `${a}.rid IN (${candidates}) AND ${none}` : none;
  }
  if (correlated) return `EXISTS (SELECT 1 FROM ${table} ${x} WHERE ${x}.rid = ${a}.rid AND ${test})`;
  return `${a}.rid IN (SELECT ${x}.rid FROM ${table} ${x} WHERE ${test})`;
}

/**
 * The rids that may match a `:missing=true` or token `:not` filter, from indexes only: the resources without a value
 * (sp_missing, migration 028) and, for `:not`, those with another value (index ranges around the excluded ones,
 * missing.ts). Undefined when the filter has no such form (a custom parameter, a `system|` value, several types).
 */
function candidatesOf(resourceType: Types, f: SearchFilter, b: Builder): string | undefined {
  if (typeof resourceType !== 'string') return undefined;
  const id = absentIdOf(resourceType, f.code);
  if (id === undefined) return undefined;
  const absent = `SELECT ms.rid FROM sp_missing ms WHERE ms.absent @> ${b.p([id], 'smallint[]')}`;
  if (f.missing === true) return absent;
  if (f.modifier !== 'not' || f.type !== 'token' || f.column) return undefined;
  const ranges = otherTokenRanges(f.values, 'xo', (v) => b.p(v));
  if (!ranges) return undefined;
  const table = tableOf(f);
  const others = ranges.map(
    (r) =>
      `SELECT xo.rid FROM ${table} xo WHERE ${typeIs(b, 'xo.resource_type', resourceType)} AND ` +
      `${codeIs(b, 'xo', table, resourceType, f.code)} AND ${r}`,
  );
  return [...others, absent].join(' UNION ALL ');
}

/**
 * How many candidates `candidatesOf` gives the filter, counted up to `cap`, and whether sp_missing is complete
 * (the index backfill of migration 028 is done); undefined when the filter has no candidates form.
 */
export function candidateCountSql(resourceType: string, f: SearchFilter, cap: number): SqlQuery | undefined {
  const b = new Builder();
  const c = candidatesOf(resourceType, f, b);
  if (!c) return undefined;
  return {
    text:
      `SELECT (SELECT count(*)::int FROM (${c} LIMIT ${b.p(cap, 'int')}) c) AS n, EXISTS (SELECT 1 FROM index_backfills ` +
      `WHERE table_name = ${b.p(MISSING_TABLE)} AND state <> 'done') AS pending`,
    values: b.values,
  };
}

/** The WHERE clause of a search over alias `r` (without `skip`: the driving filter, tested on its own rows). */
function whereClause(req: SearchRequest, scope: AccessScope, b: Builder, skip?: SearchFilter): string {
  if (req.system) return systemWhereClause(req.system, scope, b);
  const conds = [`r.resource_type = ${b.p(req.resourceType)}`, 'NOT r.deleted'];
  if (scope.projectId !== null) conds.push(`r.project_id = ${b.p(scope.projectId)}`);
  if (scope.author !== undefined)
    conds.push(`r.content->'meta'->'author'->>'reference' = ${b.p(scope.author)}`);
  if (scope.membership !== undefined && req.resourceType === 'ProjectMembership')
    conds.push(`r.id = ${b.p(scope.membership)}`);
  if (scope.memberProfiles) {
    conds.push(
      `EXISTS (SELECT 1 FROM resources mp WHERE mp.resource_type = 'ProjectMembership' AND NOT mp.deleted ` +
        `AND mp.content->'profile'->>'reference' = r.resource_type || '/' || r.id AND mp.project_id = r.project_id ` +
        `AND coalesce(mp.content->>'active', 'true') <> 'false')`,
    );
  }
  if (req.compartment) conds.push(compartmentCondition(req.resourceType, req.compartment, b));
  const reach = patientCondition(scope, 'r', (v) => b.p(v), req.resourceType);
  if (reach) conds.push(reach);
  for (const f of req.filters)
    if (f !== skip) conds.push(filterCondition(req.resourceType, f, 'r', b, scope));
  return conds.join(' AND ');
}

/**
 * The WHERE clause of a system-level search (search-system.ts): each group's types with its filters; the scope's
 * narrowing of AsyncJobs (author) and ProjectMemberships (the caller's own) on rows of those types only, and its
 * patient on rows of any type.
 */
function systemWhereClause(
  groups: NonNullable<SearchRequest['system']>,
  scope: AccessScope,
  b: Builder,
): string {
  const conds = ['NOT r.deleted'];
  if (scope.projectId !== null) conds.push(`r.project_id = ${b.p(scope.projectId)}`);
  if (scope.author !== undefined)
    conds.push(
      `(r.resource_type <> 'AsyncJob' OR r.content->'meta'->'author'->>'reference' = ${b.p(scope.author)})`,
    );
  if (scope.membership !== undefined)
    conds.push(`(r.resource_type <> 'ProjectMembership' OR r.id = ${b.p(scope.membership)})`);
  const reach = patientCondition(scope, 'r', (v) => b.p(v));
  if (reach) conds.push(reach);
  const alternatives = groups.map((g) =>
    [
      typeIs(b, 'r.resource_type', g.types.length === 1 ? (g.types[0] as string) : g.types),
      ...g.filters.map((f) =>
        filterCondition(g.types.length === 1 ? (g.types[0] as string) : g.types, f, 'r', b, scope),
      ),
    ].join(' AND '),
  );
  conds.push(alternatives.length === 1 ? (alternatives[0] as string) : or(alternatives.map((c) => `(${c})`)));
  return conds.join(' AND ');
}

/**
 * A row `r` (of `resourceType`) in the compartment: one of the params references its resource (`{def}`: it is that
 * resource), found through the reference index as a `subject=` filter is. By target type and id, which no index starts
 * with, every reference row of the table was read (1.3 s at 10 million).
 */
function compartmentCondition(
  resourceType: string,
  c: NonNullable<SearchRequest['compartment']>,
  b: Builder,
): string {
  const params = c.params.filter((p) => p !== '{def}');
  const bind = (v: unknown): string => b.p(v);
  const alternatives =
    params.length > 0
      ? [
          referencedBy(
            'r',
            bind(resourceType),
            withNarrower(resourceType, params),
            [`${c.type}/${c.id}`],
            bind,
          ),
        ]
      : [];
  if (c.params.includes('{def}')) alternatives.push(`r.id = ${b.p(c.id)}`);
  return or(alternatives);
}

/**
 * The condition a row `r` of `resources` meets when it matches `req` in `scope`, with values bound by `bind`: for
 * queries composed elsewhere (the bulk export's `_typeFilter`, src/jobs/kinds/export-query.ts).
 */
export function matchCondition(req: SearchRequest, scope: AccessScope, bind: (v: unknown) => string): string {
  return whereClause(req, scope, new Builder(bind));
}

type Keys = KeyExpr[] & { reversed?: boolean };

interface KeyExpr {
  expr: string;
  sqlType: 'text' | 'timestamptz' | 'numeric';
  descending: boolean;
}

const SORT_COLUMN: Record<string, [string, KeyExpr['sqlType']]> = {
  string: ['value_norm', 'text'],
  token: ['value', 'text'],
  reference: ['ref', 'text'],
  number: ['value', 'numeric'],
  quantity: ['value', 'numeric'],
  uri: ['value', 'text'],
};

/** A sort key as an expression per row: min value ascending, max value descending (dates: low / high). */
function keyExpr(k: SortKey, b: Builder, types: Types): KeyExpr {
  if (k.code === '_id') return { expr: 'r.id', sqlType: 'text', descending: k.descending };
  if (k.code === '_lastUpdated')
    return { expr: 'r.last_updated', sqlType: 'timestamptz', descending: k.descending };
  const agg = k.descending ? 'max' : 'min';
  const [col, sqlType] =
    k.type === 'date'
      ? [k.descending ? 'high' : 'low', 'timestamptz' as const]
      : (SORT_COLUMN[k.type] ?? ['value', 'text' as const]);
  const x = b.alias('s');
  return {
    expr: `(SELECT ${agg}(${x}.${col}) FROM ${TABLE[k.type]} ${x} WHERE ${x}.rid = r.rid AND ${codeIs(b, x, TABLE[k.type] as string, types, k.code)})`,
    sqlType,
    descending: k.descending,
  };
}

/**
 * Resources without a value of a sort key come after those with one, ascending and descending alike (so a page of
 * `_sort=-date` is read from the date index's latest end without first proving that no resource lacks a date);
 * read backwards (`reversed`), they come first.
 */
function orderBy(keys: Keys, names: string[], rid: string): string {
  const nulls = keys.reversed ? 'NULLS FIRST' : 'NULLS LAST';
  return [
    ...keys.map((k, i) => `${names[i]} ${k.descending ? 'DESC' : 'ASC'} ${nulls}`),
    `${rid} ${keys.reversed ? 'DESC' : 'ASC'}`,
  ].join(', ');
}

/** The sort keys read backwards (a `previous` page): each key's direction flipped, nulls first, rid descending. */
function reversedKeys(keys: KeyExpr[]): Keys {
  const out: Keys = keys.map((k) => ({ ...k, descending: !k.descending }));
  out.reversed = true;
  return out;
}

/** ` OFFSET n` for offset paging (`_offset`), or nothing. */
function offset(req: SearchRequest, b: Builder): string {
  return req.offset ? ` OFFSET ${b.p(req.offset, 'int')}` : '';
}

/** Rows strictly after the cursor in ORDER BY (keys..., rid): nulls last, or first when read backwards (`reversed`). */
function afterCursor(
  keys: Keys,
  names: string[],
  rid: string,
  cursor: NonNullable<SearchRequest['cursor']>,
  b: Builder,
): string {
  const eq: string[] = [];
  const alternatives: string[] = [];
  keys.forEach((k, i) => {
    const col = names[i] as string;
    const v = cursor.keys[i] ?? null;
    const bound = v === null ? null : b.p(v, k.sqlType);
    let after: string;
    const past = bound === null ? '' : `${col} ${k.descending ? '<' : '>'} ${bound}`;
    if (keys.reversed) after = bound === null ? `${col} IS NOT NULL` : past;
    else after = bound === null ? 'FALSE' : `(${past} OR ${col} IS NULL)`;
    alternatives.push([...eq, after].join(' AND '));
    eq.push(bound === null ? `${col} IS NULL` : `${col} = ${bound}`);
  });
  alternatives.push(
    [...eq, `${rid} ${keys.reversed ? '<' : '>'} ${b.p(cursor.rid, 'bigint')}`].join(' AND '),
  );
  return `(${alternatives.map((s) => `(${s})`).join(' OR ')})`;
}

/**
 * The JSON text of a resource row `alias`: its stored content, without the `omit`ted top-level properties when
 * given (deleting keys costs PostgreSQL about what serialising them would; less text to send and parse).
 * `bind` binds a value and returns its placeholder.
 */
export function contentJson(
  alias: string,
  omit: readonly string[] | undefined,
  bind: (v: unknown) => string,
): string {
  if (!omit || omit.length === 0) return `${alias}.content::text`;
  // content is json (migration 011): json_each keeps each value's text as stored, so decimals keep their form.
  return (
    `coalesce((SELECT json_object_agg(e.key, e.value ORDER BY e.n) FROM json_each(${alias}.content) WITH ORDINALITY ` +
    `AS e(key, value, n) WHERE e.key <> ALL(${bind(omit)}::text[]))::text, '{}')`
  );
}

const contentText = (req: SearchRequest, b: Builder): string => contentJson('r', req.omit, (v) => b.p(v));

/**
 * The page query: `count + 1` rows (one more tells there is a next page) with rid, resource_type, id, json and
 * the sort key values as text (k0, k1, ...) for the next cursor. Default order: last_updated, rid. A `before`
 * cursor reads the rows before it in reverse order (the caller turns the page round).
 */
export function searchSql(req: SearchRequest, scope: AccessScope, limit = req.count + 1): SqlQuery {
  const sorted = req.sort.length > 0;
  const driver = sorted ? undefined : drivingFilter(req, scope);
  if (driver) return drivenSql(req, scope, driver, limit);
  const b = new Builder();
  const where = whereClause(req, scope, b);
  const back = req.cursor?.before === true;
  const types = req.system ? req.system.flatMap((g) => g.types) : req.resourceType;
  const forward: Keys = req.sort.map((k) => keyExpr(k, b, types));
  const keys = back ? reversedKeys(forward) : forward;
  const names = keys.map((_, i) => `k${i}`);
  if (!sorted) {
    // One level (planned in half the time of the two-level form): with a selective filter the few matches are
    // sorted; otherwise the resources_type_*_updated indexes give the order and LIMIT stops the scan.
    const after = req.cursor
      ? ` AND (r.last_updated, r.rid) ${back ? '<' : '>'} (${b.p(req.cursor.keys[0], 'timestamptz')}, ${b.p(req.cursor.rid, 'bigint')})`
      : '';
    const dir = back ? ' DESC' : '';
    const text =
      `SELECT r.rid, r.resource_type, r.id, ${contentText(req, b)} AS json, r.last_updated::text AS k0 FROM resources r ` +
      `WHERE ${where}${after} ORDER BY r.last_updated${dir}, r.rid${dir} LIMIT ${b.p(limit, 'int')}${offset(req, b)}`;
    return { text, values: b.values };
  }
  // Sort keys are computed per match; the page's rids are chosen first so only they are read and serialised.
  const cols = keys.map((k, i) => `${k.expr} AS ${names[i]}`).join(', ');
  const after = req.cursor ? ` WHERE ${afterCursor(keys, names, 'q.rid', req.cursor, b)}` : '';
  const inner = `SELECT q.* FROM (SELECT r.rid, ${cols} FROM resources r WHERE ${where}) q${after} ORDER BY ${orderBy(keys, names, 'q.rid')} LIMIT ${b.p(limit, 'int')}${offset(req, b)}`;
  const keyCols = names.map((n) => `p.${n}::text AS ${n}`).join(', ');
  const text =
    `WITH p AS (${inner}) SELECT p.rid, r.resource_type, r.id, ${contentText(req, b)} AS json, ${keyCols} ` +
    `FROM p JOIN resources r ON r.rid = p.rid ORDER BY ${orderBy(
      keys,
      names.map((n) => `p.${n}`),
      'p.rid',
    )}`;
  return { text, values: b.values };
}

/**
 * The filter whose index orders a search without `_sort`, when it has one: the first string filter with one value
 * matched by prefix or `:exact`, else the first token filter with one `system|code` value. Such a value can match
 * a fixed share of a growing table (`family=Smith`, `code=http://loinc.org|8302-2`); pages in `_lastUpdated` order
 * would then read every match to find the first few, as PostgreSQL often estimates these matches too few to walk
 * the `_lastUpdated` index instead. Pages come in the order of that filter's index: matched value (strings), then
 * rid. A page is then read straight off the index, at the same cost at any table size. With other filters the
 * search keeps the `_lastUpdated` order, where PostgreSQL starts from whichever filter it finds most selective.
 */
function drivingFilter(req: SearchRequest, scope: AccessScope): SearchFilter | undefined {
  // Only as the search's one condition beyond its project: another filter, a compartment or a narrower scope
  // may match far fewer rows, and the order of this index would then make PostgreSQL walk its matches to find them.
  const f = req.filters.length === 1 ? req.filters[0] : undefined;
  if (
    !f ||
    req.system ||
    req.compartment ||
    scope.author !== undefined ||
    (scope.membership !== undefined && req.resourceType === 'ProjectMembership') ||
    scope.memberProfiles ||
    scope.patient
  )
    return undefined;
  if (f.column || f.chain || f.has || f.missing !== undefined || f.values.length !== 1) return undefined;
  const v = f.values[0] as FilterValue;
  if (v.kind === 'string')
    return (f.modifier === undefined || f.modifier === 'exact') && !unionOf(req.resourceType, f.code)
      ? f
      : undefined;
  const systemAndCode = v.kind === 'token' && v.code !== undefined && !!v.system && f.modifier === undefined;
  return systemAndCode ? f : undefined;
}

/**
 * Row `e` (of the same resource and parameter as the driving row `d`) also matches and comes first. Written so
 * that no condition fits the value index: the probe must go by rid (a handful of rows), as a value index scan would
 * read every match of the search for each row of the page. The caller's `OFFSET 0` keeps it a probe per page row
 * (a subplan): as a join, PostgreSQL may merge it with the rid index walked from its first row.
 */
function earlierMatch(f: SearchFilter, b: Builder): string {
  const v = f.values[0] as FilterValue;
  if (v.kind === 'token')
    return 'e.value IS NOT DISTINCT FROM d.value AND e.system IS NOT DISTINCT FROM d.system AND e.ctid < d.ctid';
  // `value_exact` determines `value_norm`, and the index has no `value_exact`.
  if (f.modifier === 'exact') return 'e.value_exact = d.value_exact AND e.ctid < d.ctid';
  const norm = normaliseString(v.kind === 'string' ? v.value : '');
  return (
    `left(e.value_norm, ${b.p([...norm].length, 'int')}) = ${b.p(norm)} ` +
    'AND (e.value_norm ~<~ d.value_norm OR (e.value_norm = d.value_norm AND e.ctid < d.ctid))'
  );
}

/**
 * The page query in the order of the driving filter's index rows `d`: for a string, value_norm (in the index's byte
 * order, text_pattern_ops) then rid; for a token (one system and code), rid. A resource with several matching rows
 * (`name=jo` on given "John" and family "Jones") is taken at its first one only. The cursor's key is that value
 * (strings; empty for tokens) and the rid.
 */
function drivenSql(req: SearchRequest, scope: AccessScope, f: SearchFilter, limit: number): SqlQuery {
  const b = new Builder();
  const where = whereClause(req, scope, b, f);
  const table = TABLE[f.type] as string;
  const rt = b.p(req.resourceType);
  // A union parameter (`combo-code`, union-params.ts) has its rows under its parts' codes: one walk per code, merged.
  const parts = unionOf(req.resourceType, f.code);
  const all = parts ? b.p(parts, 'text[]') : undefined;
  const keyed = f.type === 'string';
  // Forwards: ascending; a `before` cursor reads backwards.
  const back = req.cursor?.before === true;
  const [past, pastOrAt, ridPast, dir] = back ? ['~<~', '~<=~', '<', ' DESC'] : ['~>~', '~>=~', '>', ''];
  const walk = (code: string, rows: string): string => {
    const test = `d.resource_type = ${rt} AND d.code = ${code} AND ${valueCondition(f, f.values[0] as FilterValue, 'd', b)}`;
    // Each resource once: at its first matching row (of any of the union's codes).
    const earlier = all
      ? `e.code = ANY(${all}) AND ${earlierMatch(f, b).replace('e.ctid < d.ctid', '(e.code < d.code OR (e.code = d.code AND e.ctid < d.ctid))')}`
      : `e.code = d.code AND ${earlierMatch(f, b)}`;
    const conds = [
      test,
      `NOT EXISTS (SELECT 1 FROM ${table} e WHERE e.rid = d.rid AND e.resource_type = d.resource_type ` +
        `AND ${earlier} OFFSET 0)`,
      where,
    ];
    if (req.cursor) {
      const rid = `d.rid ${ridPast} ${b.p(req.cursor.rid, 'bigint')}`;
      const v = keyed ? b.p(req.cursor.keys[0] ?? '') : '';
      // `pastOrAt` alone bounds the index range; the rest resumes within the rows of the cursor's value.
      conds.push(keyed ? `d.value_norm ${pastOrAt} ${v} AND (d.value_norm ${past} ${v} OR ${rid})` : rid);
    }
    const order = keyed ? `d.value_norm USING ${back ? '~>~' : '~<~'}, d.rid${dir}` : `d.rid${dir}`;
    return (
      `SELECT r.rid, r.resource_type, r.id, ${contentText(req, b)} AS json, ${keyed ? 'd.value_norm' : "''"} AS k0 ` +
      // Each index row's resource fetched by rid, in index order (OFFSET 0 keeps the join a nested loop: a merge
      // join on rid would walk the resources table from its first row to reach rows added late).
      `FROM ${table} d CROSS JOIN LATERAL (SELECT * FROM resources r0 WHERE r0.rid = d.rid OFFSET 0) r ` +
      `WHERE ${conds.join(' AND ')} ORDER BY ${order} LIMIT ${rows}`
    );
  };
  if (!parts) return { text: `${walk(b.p(f.code), b.p(limit, 'int'))}${offset(req, b)}`, values: b.values };
  // Token rows only (drivingFilter): rid order. Each walk reads at most the page (and what `_offset` skips).
  const rows = b.p(limit + (req.offset ?? 0), 'int');
  const walks = parts.map((c) => `(${walk(b.p(c), rows)})`);
  const text = `SELECT * FROM (${walks.join(' UNION ALL ')}) u ORDER BY u.rid${dir} LIMIT ${b.p(limit, 'int')}${offset(req, b)}`;
  return { text, values: b.values };
}

/** The number of matches; with `cap`, of at most `cap` of them (the count stops reading there). */
export function countSql(req: SearchRequest, scope: AccessScope, cap?: number): SqlQuery {
  const b = new Builder();
  const where = whereClause(req, scope, b);
  if (cap === undefined)
    return { text: `SELECT count(*)::int AS total FROM resources r WHERE ${where}`, values: b.values };
  return {
    text: `SELECT count(*)::int AS total FROM (SELECT 1 FROM resources r WHERE ${where} LIMIT ${b.p(cap, 'int')}) c`,
    values: b.values,
  };
}

/** The statement whose planned row count is the planner's estimate of the matches (`EXPLAIN` it). */
export function estimateSql(req: SearchRequest, scope: AccessScope): SqlQuery {
  const b = new Builder();
  const where = whereClause(req, scope, b);
  return { text: `SELECT 1 FROM resources r WHERE ${where}`, values: b.values };
}

/** Cap on resources one `_include`/`_revinclude` adds to a page. */
export const INCLUDE_LIMIT = 1000;

const optional = (cond: string | undefined): string[] => (cond ? [cond] : []);

/**
 * ` AND …` of the scope's project, patient and membership on rows of alias `a` of any type (included resources): an
 * included membership that is not the caller's own is not found, so an `:iterate` does not walk on from it either.
 */
function scopeConditions(scope: AccessScope, a: string, b: Builder): string {
  const conds = [
    ...(scope.projectId !== null ? [`${a}.project_id = ${b.p(scope.projectId)}`] : []),
    ...optional(patientCondition(scope, a, (v) => b.p(v))),
    ...(scope.membership !== undefined
      ? [`(${a}.resource_type <> 'ProjectMembership' OR ${a}.id = ${b.p(scope.membership)})`]
      : []),
  ];
  return conds.map((c) => ` AND ${c}`).join('');
}

/**
 * `_include`: the targets of the given matches' references (same project unless scope is global), with their rids so
 * that an iterated _include can start from them.
 */
export function includeSql(spec: IncludeSpec, rids: readonly number[], scope: AccessScope): SqlQuery {
  const b = new Builder();
  const conds = [`x.rid = ANY(${b.p(rids, 'bigint[]')})`, `x.resource_type = ${b.p(spec.sourceType)}`];
  if (spec.code !== '*') conds.push(codeIs(b, 'x', 'sp_reference', spec.sourceType, spec.code));
  if (spec.targetType) conds.push(`${refPart(b, 'x', 1)} = ${b.p(spec.targetType)}`);
  conds.push(oneSlash(b, 'x'));
  const target = `${refPart(b, 'x', 1)}, ${refPart(b, 'x', 2)}`;
  const scopeCond = scopeConditions(scope, 't', b);
  return {
    text:
      `SELECT t.rid, t.resource_type, t.id, t.content::text AS json FROM resources t ` +
      `WHERE (t.resource_type, t.id) IN (SELECT ${target} FROM sp_reference x WHERE ${conds.join(' AND ')}) ` +
      `AND NOT t.deleted${scopeCond} ORDER BY t.rid LIMIT ${b.p(INCLUDE_LIMIT, 'int')}`,
    values: b.values,
  };
}

/**
 * `_revinclude`: resources of spec.sourceType (any type for `*`) whose spec.code reference points at one of `refs`
 * (`Type/id`).
 */
export function revincludeSql(spec: IncludeSpec, refs: readonly string[], scope: AccessScope): SqlQuery {
  const b = new Builder();
  const anyType = spec.sourceType === '*';
  const src = anyType ? '' : b.p(spec.sourceType);
  const conds = [...(anyType ? [] : [`x.resource_type = ${src}`]), `x.ref = ANY(${b.p(refs, 'text[]')})`];
  if (spec.code !== '*')
    conds.push(codeIs(b, 'x', 'sp_reference', anyType ? '*' : spec.sourceType, spec.code));
  const typeCond = anyType ? '' : ` AND s.resource_type = ${src}`;
  const scopeCond = scopeConditions(scope, 's', b);
  return {
    text:
      `SELECT s.rid, s.resource_type, s.id, s.content::text AS json FROM resources s ` +
      `WHERE s.rid IN (SELECT x.rid FROM sp_reference x WHERE ${conds.join(' AND ')}) ` +
      `${typeCond} AND NOT s.deleted${scopeCond} ORDER BY s.rid LIMIT ${b.p(INCLUDE_LIMIT, 'int')}`,
    values: b.values,
  };
}

/** The index column a one-key `_sort` walks, by parameter type and direction (dates: low ascending, high descending). */
function walkColumn(k: SortKey): { col: string; sqlType: KeyExpr['sqlType']; bytewise: boolean } | undefined {
  if (k.type === 'date')
    return { col: k.descending ? 'high' : 'low', sqlType: 'timestamptz', bytewise: false };
  const c = SORT_COLUMN[k.type];
  if (!c || !TABLE[k.type]) return undefined;
  // String and uri values are indexed with text_pattern_ops: their index order is byte order (~<~), which is the
  // order of min()/max() under the C collations Cinder's databases use (embedded: --locale=C).
  return { col: c[0], sqlType: c[1], bytewise: k.type === 'string' || k.type === 'uri' };
}

/**
 * The page of a search sorted by one search parameter (`_sort=date`, `_sort=-value-quantity`, ...), read in the order
 * of that parameter's index rather than by computing every match's sort key and sorting them all. The old order is
 * kept: a resource sorts at its least value ascending (its greatest descending), ties by rid, and resources without
 * a value come last (orderBy), by rid. So the page is two segments,
 * read one after the other until the page is full: the resources with a value, walked from the index (each taken
 * at its first row in the walk's order), and the resources without one. Both are joins the planner may also start
 * from the other filters' matches (`subject=`), which are then few. Undefined when the search is not of that form:
 * several sort keys, `_id`/`_lastUpdated`, a system-level search (those keep `searchSql`).
 */
export function sortWalkSql(
  req: SearchRequest,
  scope: AccessScope,
  limit = req.count + 1,
): SqlQuery[] | undefined {
  const k = req.sort.length === 1 ? req.sort[0] : undefined;
  if (!k || req.system || k.code === '_id' || k.code === '_lastUpdated') return undefined;
  const w = walkColumn(k);
  if (!w) return undefined;
  const table = TABLE[k.type] as string;
  // A reference parameter whose rows a narrower one shares (`subject` with `patient`, reference-pairs.ts) has its
  // values under two codes: the walk reads one code, so that sort keeps searchSql's order.
  if (table === 'sp_reference' && narrowerOf(req.resourceType).has(k.code)) return undefined;
  // Likewise a union parameter (`combo-code`: `code` and `component-code` rows, union-params.ts).
  if (unionOf(req.resourceType, k.code)) return undefined;
  const back = req.cursor?.before === true;
  // Reading order of the value column and of rid: forwards, the sort's own direction and rid ascending.
  const colDesc = back !== k.descending;
  const ridDesc = back;
  // Segments in forward order: the values, then the resources without one (see orderBy).
  const forward: ('walk' | 'missing')[] = ['walk', 'missing'];
  const reading = back ? [...forward].reverse() : forward;
  const cursorIn: 'walk' | 'missing' | undefined = req.cursor
    ? req.cursor.keys[0] === null || req.cursor.keys[0] === undefined
      ? 'missing'
      : 'walk'
    : undefined;
  const from = cursorIn ? reading.indexOf(cursorIn) : 0;
  // With `_offset`, each segment reads the rows it skips too; the caller slices.
  const rows = limit + (req.offset ?? 0);
  return reading.slice(from).map((seg, i) => {
    const b = new Builder();
    const where = whereClause(req, scope, b);
    const rt = b.p(req.resourceType);
    const code = b.p(k.code);
    const cursor = i === 0 && req.cursor ? req.cursor : undefined;
    const ridPast = ridDesc ? '<' : '>';
    const ridDir = ridDesc ? ' DESC' : '';
    if (seg === 'missing') {
      const conds = [
        where,
        `NOT EXISTS (SELECT 1 FROM ${table} m WHERE m.rid = r.rid AND m.resource_type = ${rt} AND m.code = ${code} ` +
          `AND m.${w.col} IS NOT NULL)`,
      ];
      if (cursor) conds.push(`r.rid ${ridPast} ${b.p(cursor.rid, 'bigint')}`);
      return {
        text:
          `SELECT r.rid, r.resource_type, r.id, ${contentText(req, b)} AS json, NULL::text AS k0 FROM resources r ` +
          `WHERE ${conds.join(' AND ')} ORDER BY r.rid${ridDir} LIMIT ${b.p(rows, 'int')}`,
        values: b.values,
      };
    }
    const lt = w.bytewise ? '~<~' : '<';
    const gt = w.bytewise ? '~>~' : '>';
    // The row `d` is its resource's sort value: no row `e` of the same resource comes before it in the sort's own
    // (forward) direction. Probed by rid (OFFSET 0 keeps it a per-row subplan, never a hash of the whole table).
    const better = k.descending ? gt : lt;
    const conds = [
      `d.resource_type = ${rt}`,
      `d.code = ${code}`,
      `d.${w.col} IS NOT NULL`,
      `NOT EXISTS (SELECT 1 FROM ${table} e WHERE e.rid = d.rid AND e.resource_type = d.resource_type ` +
        `AND e.code = d.code AND (e.${w.col} ${better} d.${w.col} OR (e.${w.col} = d.${w.col} AND e.ctid < d.ctid)) OFFSET 0)`,
      where,
    ];
    if (cursor) {
      const v = b.p(cursor.keys[0], w.sqlType);
      const [past, pastOrAt] = colDesc ? [lt, w.bytewise ? '~<=~' : '<='] : [gt, w.bytewise ? '~>=~' : '>='];
      // `pastOrAt` alone bounds the index range; the rest resumes within the rows of the cursor's value.
      conds.push(
        `d.${w.col} ${pastOrAt} ${v} AND (d.${w.col} ${past} ${v} OR d.rid ${ridPast} ${b.p(cursor.rid, 'bigint')})`,
      );
    }
    const colOrder = w.bytewise ? ` USING ${colDesc ? '~>~' : '~<~'}` : colDesc ? ' DESC' : '';
    return {
      text:
        `SELECT r.rid, r.resource_type, r.id, ${contentText(req, b)} AS json, d.${w.col}::text AS k0 ` +
        `FROM ${table} d JOIN resources r ON r.rid = d.rid WHERE ${conds.join(' AND ')} ` +
        `ORDER BY d.${w.col}${colOrder}, d.rid${ridDir} LIMIT ${b.p(rows, 'int')}`,
      values: b.values,
    };
  });
}
