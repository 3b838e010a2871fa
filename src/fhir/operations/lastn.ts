// Observation/$lastn (https://hl7.org/fhir/R4/observation-operation-lastn.html, API.md §11): the `max` most recent
// Observations of one subject per code, newest first, as a searchset Bundle; read from the sp_lastn index (migration 020)
// so that its cost follows the number of codes and `max`, not the number of the subject's Observations.
import type { Queryable } from '../../storage/db.js';
import { assertRead } from '../access.js';
import { bundleToJson, type BundleEntryText } from '../bundle.js';
import { FhirError } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import { RawJson, type FhirResult } from '../result.js';
import { patientCondition } from '../search/patient-reach.js';
import { indexKey } from '../search/normalise.js';
import { operationParams } from './async-start.js';
import type { OperationDefinition, OperationInput } from './operation.js';
import { parametersOf } from './parameters-body.js';

/** `max` at most (API.md §11); more per code than a client can show. */
export const MAX_MAX = 1000;
/** Distinct codes one answer may hold, and Observations in all. */
export const MAX_GROUPS = 1000;
export const MAX_ENTRIES = 10_000;
const MAX_VALUES = 50;
const ALLOWED = new Set(['patient', 'subject', 'category', 'code', 'max', '_format', '_pretty']);

const bad = (text: string, code: string): FhirError => new FhirError('invalid', text, `lastn.${code}`);
const short = (s: string): string => (s.length > 64 ? `${s.slice(0, 64)}…` : s);

interface Token {
  system?: string;
  value: string;
}

export interface LastnParams {
  subject: string;
  /** Category keys as sp_lastn holds them; [''] without a category filter. */
  categories: string[];
  /** Absent: every code of the subject. */
  codes?: Token[];
  max: number;
}

const REF = /^[A-Z][A-Za-z]{1,63}\/[A-Za-z0-9\-.]{1,64}$/;
const ID = /^[A-Za-z0-9\-.]{1,64}$/;

function subjectOf(name: 'patient' | 'subject', text: string, fhirBase: string): string {
  const ref = text.startsWith(`${fhirBase}/`) ? text.slice(fhirBase.length + 1) : text;
  if (name === 'patient' && ID.test(ref)) return `Patient/${ref}`;
  if (!REF.test(ref)) throw bad(`Invalid ${name}: ${short(text)} (a reference Type/id)`, 'subject');
  if (name === 'patient' && !ref.startsWith('Patient/'))
    throw bad(`Invalid patient: ${short(text)} (a Patient reference)`, 'patient-type');
  return ref;
}

function tokens(name: string, values: string[] | undefined): Token[] | undefined {
  if (!values) return undefined;
  const out = values
    .flatMap((v) => v.split(','))
    .map((v) => {
      const bar = v.indexOf('|');
      const token = bar < 0 ? { value: v } : { system: v.slice(0, bar), value: v.slice(bar + 1) };
      if (token.value === '') throw bad(`Invalid ${name}: ${short(v)} (a code or system|code)`, 'token');
      return token;
    });
  if (out.length > MAX_VALUES) throw bad(`At most ${MAX_VALUES} values of ${name}`, 'token-count');
  return out;
}

/** Reference parameters of a Parameters body (`valueReference`), which operationParams does not read. */
function bodyReferences(body: unknown): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const p of parametersOf(body, 'lastn.body')) {
    const ref = (p as { valueReference?: { reference?: unknown } }).valueReference?.reference;
    if (typeof ref === 'string') (out[p.name] ??= []).push(ref);
  }
  return out;
}

export function lastnParams(i: Pick<OperationInput, 'request'>, fhirBase: string): LastnParams {
  const q = operationParams(i.request);
  for (const [k, v] of Object.entries(bodyReferences(i.request.body))) q[k] = [...(q[k] ?? []), ...v];
  for (const k of Object.keys(q))
    if (!ALLOWED.has(k))
      throw bad(
        `$lastn does not support the parameter ${short(k)} (patient, subject, category, code, max)`,
        'unsupported',
      );
  const subjects = [
    ...(q.patient ?? []).map((s) => subjectOf('patient', s, fhirBase)),
    ...(q.subject ?? []).map((s) => subjectOf('subject', s, fhirBase)),
  ];
  if (subjects.length !== 1) throw bad('$lastn needs one patient or subject', 'subject-count');
  const category = tokens('category', q.category);
  const codes = tokens('code', q.code);
  if (!category && !codes) throw bad('$lastn needs a category or a code (or both)', 'category-or-code');
  const maxText = q.max?.length === 1 ? q.max[0] : q.max === undefined ? '1' : undefined;
  if (maxText === undefined || !/^\d{1,7}$/.test(maxText) || Number(maxText) < 1 || Number(maxText) > MAX_MAX)
    throw bad(`Invalid max: ${short(String(q.max))} (a whole number from 1 to ${MAX_MAX})`, 'max');
  return {
    subject: indexKey(subjects[0] as string),
    categories: category
      ? [...new Set(category.map((c) => indexKey(`${c.system ?? '*'}|${c.value}`)))]
      : [''],
    ...(codes ? { codes: codes.map((c) => ({ ...c, value: indexKey(c.value) })) } : {}),
    max: Number(maxText),
  };
}

/** A query and its parameters. */
export interface LastnSql {
  text: string;
  values: unknown[];
}

/**
 * The distinct systems (`system`) or codes (`code`) of the subject under one category key, by a skip scan of the index:
 * one index probe per code found, at most MAX_GROUPS + 1.
 */
export function skipScanSql(subject: string, category: string, what: 'system' | 'code'): LastnSql {
  const cols = what === 'system' ? 'l.system' : 'l.system, l.value';
  const next = what === 'system' ? 'l.system > c.system' : '(l.system, l.value) > (c.system, c.value)';
  return {
    text:
      `WITH RECURSIVE c AS (` +
      `(SELECT ${cols}, 1 AS n FROM sp_lastn l WHERE l.subject = $1 AND l.category = $2 ORDER BY ${cols} LIMIT 1) ` +
      `UNION ALL SELECT nx.*, c.n + 1 FROM c CROSS JOIN LATERAL (SELECT ${cols} FROM sp_lastn l ` +
      `WHERE l.subject = $1 AND l.category = $2 AND ${next} ORDER BY ${cols} LIMIT 1) nx WHERE c.n <= $3) ` +
      `SELECT ${what === 'system' ? 'system' : 'system, value'} FROM c`,
    values: [subject, category, MAX_GROUPS],
  };
}

/**
 * The (category key, system, code) ranges of the subject to read: every code under each category key, or the codes
 * asked for (a code without a system: under each system the subject has under that key).
 */
export async function lastnGroups(db: Queryable, p: LastnParams): Promise<[string, string, string][]> {
  const out: [string, string, string][] = [];
  const run = async (category: string, what: 'system' | 'code') => {
    const q = skipScanSql(p.subject, category, what);
    return (await db.query<{ system: string; value?: string }>(q.text, q.values)).rows;
  };
  for (const category of p.categories) {
    if (!p.codes) {
      for (const r of await run(category, 'code')) out.push([category, r.system, r.value as string]);
    } else {
      const open = p.codes.some((c) => c.system === undefined);
      const systems = open ? (await run(category, 'system')).map((r) => r.system) : [];
      for (const c of p.codes) {
        if (c.system !== undefined) out.push([category, indexKey(c.system), c.value]);
        else for (const system of systems) out.push([category, system, c.value]);
      }
    }
    if (out.length > MAX_GROUPS) break;
  }
  return out;
}

/** The `max` newest Observations of each group the caller may read (its project, its token's patient), one range each. */
export function hitsSql(
  groups: readonly [string, string, string][],
  p: LastnParams,
  scope: RepoContext['scope'],
): LastnSql {
  const values: unknown[] = [];
  const bind = (v: unknown): string => `$${values.push(v)}`;
  const conds = [
    `l.subject = ${bind(p.subject)}`,
    'l.category = g.category',
    'l.system = g.system',
    'l.value = g.value',
    'NOT r.deleted',
  ];
  if (scope.projectId !== null) conds.push(`r.project_id = ${bind(scope.projectId)}`);
  const reach = patientCondition(scope, 'r', bind, 'Observation');
  if (reach) conds.push(reach);
  const text =
    `SELECT g.system, g.value, t.* FROM unnest(${bind(groups.map((g) => g[0]))}::text[], ` +
    `${bind(groups.map((g) => g[1]))}::text[], ${bind(groups.map((g) => g[2]))}::text[]) ` +
    `AS g(category, system, value) CROSS JOIN LATERAL (` +
    `SELECT l.rid, extract(epoch FROM l.effective)::float8 AS effective, r.resource_type, r.id, ` +
    `r.content::text AS json FROM sp_lastn l JOIN resources r ON r.rid = l.rid WHERE ${conds.join(' AND ')} ` +
    `ORDER BY l.effective DESC, l.rid DESC LIMIT ${bind(p.max)}) t`;
  return { text, values };
}

interface Hit {
  system: string;
  value: string;
  rid: string;
  effective: number | string;
  resource_type: string;
  id: string;
  json: string;
}

async function lastn(db: Queryable, ctx: RepoContext, i: OperationInput): Promise<FhirResult> {
  assertRead(ctx.actor, 'Observation', 'search');
  const p = lastnParams(i, ctx.fhirBase);
  const groups = await lastnGroups(db, p);
  if (groups.length > MAX_GROUPS)
    throw bad(`More than ${MAX_GROUPS} codes match; narrow $lastn by category or code`, 'too-many-codes');
  if (groups.length * p.max > MAX_ENTRIES)
    throw bad(
      `The answer could hold ${groups.length * p.max} Observations (at most ${MAX_ENTRIES}); lower max or narrow ` +
        'by category or code',
      'too-many-entries',
    );
  const q = hitsSql(groups, p, ctx.scope);
  const rows = groups.length ? (await db.query<Hit>(q.text, q.values)).rows : [];
  const entry: BundleEntryText[] = [];
  const seen = new Set<string>();
  for (const hit of pickNewest(rows, p.max)) {
    // An Observation with several codings is in several groups: listed once.
    if (seen.has(String(hit.rid))) continue;
    seen.add(String(hit.rid));
    entry.push({
      fullUrl: `${ctx.fhirBase}/${hit.resource_type}/${hit.id}`,
      resource: hit.json,
      search: { mode: 'match' },
    });
  }
  const link = [{ relation: 'self', url: i.request.url }];
  return {
    status: 200,
    body: new RawJson(bundleToJson({ type: 'searchset', total: entry.length, link, entry }, ctx.newId())),
  };
}

/** Per code (system|value), the `max` newest hits over every category key asked for, codes in order. */
function pickNewest(rows: readonly Hit[], max: number): Hit[] {
  const byCode = new Map<string, Hit[]>();
  for (const r of rows) {
    const key = `${r.system}|${r.value}`;
    const list = byCode.get(key);
    if (list) list.push(r);
    else byCode.set(key, [r]);
  }
  const out: Hit[] = [];
  for (const key of [...byCode.keys()].sort()) {
    const hits = (byCode.get(key) as Hit[]).sort(
      (a, b) => Number(b.effective) - Number(a.effective) || Number(b.rid) - Number(a.rid),
    );
    const seen = new Set<string>();
    for (const h of hits) {
      if (seen.size >= max) break;
      if (seen.has(String(h.rid))) continue;
      seen.add(String(h.rid));
      out.push(h);
    }
  }
  return out;
}

export const lastnOperation: OperationDefinition = {
  code: 'lastn',
  level: 'type',
  types: ['Observation'],
  affectsState: false,
  replicaReads: true,
  definition: 'http://hl7.org/fhir/OperationDefinition/Observation-lastn',
  run: (env, i) => lastn(env.db, i.ctx, i),
};
