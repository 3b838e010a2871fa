// What the terminology operations share (https://hl7.org/fhir/R4/terminology-service.html): their parameters from the
// query string (GET) or a Parameters body (POST), each of a declared kind — text (`valueString`, `valueUri`,
// `valueCode`, `valueInteger`, …), a `valueCoding`, a `valueCodeableConcept` or a `resource` — the caller's right to
// read the types an operation reads, the target of an instance-level call, and Parameters answers.
import { assertRead } from '../access.js';
import type { At, Coding } from '../conformance/model.js';
import {
  asService,
  type CodeSystemIndex,
  type TerminologyService,
} from '../conformance/terminology/index.js';
import { parseJson } from '../json/parse.js';
import { FhirError } from '../outcome.js';
import { readVisibleRow } from '../repository/read.js';
import type { Resource } from '../types.js';
import type { OperationEnv, OperationInput } from './operation.js';
import { parametersOf } from './parameters-body.js';

type Json = Record<string, unknown>;
export type Kind = 'text' | 'coding' | 'concept' | 'resource';

export interface TxParams {
  text(name: string): string | undefined;
  coding(name: string): Coding | undefined;
  /** A CodeableConcept's codings. */
  concept(name: string): Coding[] | undefined;
  resource(name: string): Resource | undefined;
}

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

const bad = (op: string, text: string, name: string): FhirError =>
  new FhirError('invalid', text, `${op}.param`, { expression: [name] });

function codingOf(v: unknown, op: string, name: string): Coding {
  if (!isObject(v)) throw bad(op, `${name} must be a Coding`, name);
  const out: Coding = {};
  for (const k of ['system', 'version', 'code', 'display'] as const) {
    const x = v[k];
    if (x === undefined) continue;
    if (typeof x !== 'string') throw bad(op, `${name}.${k} must be a string`, name);
    out[k] = x;
  }
  return out;
}

function conceptOf(v: unknown, op: string, name: string): Coding[] {
  if (!isObject(v) || (v.coding !== undefined && !Array.isArray(v.coding)))
    throw bad(op, `${name} must be a CodeableConcept`, name);
  return ((v.coding as unknown[] | undefined) ?? []).map((c) => codingOf(c, op, name));
}

/** One value per name (the first); a parameter of a kind the name does not take is a 400. */
export function txParams(i: OperationInput, op: string, kinds: Record<string, Kind>): TxParams {
  const values = new Map<string, unknown>();
  for (const [name, v] of Object.entries(i.request.query)) {
    const kind = kinds[name];
    if (kind === undefined) continue;
    if (kind !== 'text') throw bad(op, `${name} can only be given in a POST Parameters body`, name);
    values.set(name, [v].flat()[0]);
  }
  for (const p of parametersOf(i.request.body, `${op}.body`)) {
    const kind = kinds[p.name];
    if (kind === undefined || values.has(p.name)) continue;
    if (kind === 'resource') {
      if (!p.resource) throw bad(op, `${p.name} must be given as a resource`, p.name);
      values.set(p.name, p.resource);
    } else if (kind === 'coding') values.set(p.name, codingOf(p.valueCoding, op, p.name));
    else if (kind === 'concept') values.set(p.name, conceptOf(p.valueCodeableConcept, op, p.name));
    else {
      const key = Object.keys(p).find((k) => k.startsWith('value'));
      const v = key ? p[key] : undefined;
      if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean')
        throw bad(op, `${p.name} must be a simple value (valueString, valueUri, valueCode, …)`, p.name);
      values.set(p.name, String(v));
    }
  }
  return {
    text: (n) => values.get(n) as string | undefined,
    coding: (n) => values.get(n) as Coding | undefined,
    concept: (n) => values.get(n) as Coding[] | undefined,
    resource: (n) => values.get(n) as Resource | undefined,
  };
}

/** The caller may read every type the operation reads (their role and their token's scopes), or a 403. */
export function assertReadable(i: OperationInput, types: readonly string[]): void {
  for (const t of types) assertRead(i.ctx.actor, t, 'read');
}

/** The caller's project: resolution there first, then in the shared set, never in another project. */
export const atOf = (i: OperationInput): At => ({ projectId: i.ctx.actor.projectId });

export const terminologyOf = (env: OperationEnv): TerminologyService =>
  asService(env.conformance.terminology);

/** The resource of an instance-level call (the caller's project's, or a shared one) and where it resolves, or 404. */
export async function instanceTarget(
  env: OperationEnv,
  i: OperationInput,
  type: 'ValueSet' | 'CodeSystem' | 'ConceptMap',
): Promise<{ resource: Resource; at: At }> {
  const row = await readVisibleRow(env.db, i.ctx, type, i.id);
  if (row && !row.deleted)
    return { resource: parseJson(row.json) as Resource, at: { projectId: row.project_id } };
  const shared = env.conformance.shared.byId(type, i.id);
  if (shared) return { resource: shared, at: atOf(i) };
  throw new FhirError(
    'not-found',
    `Not found: ${type}/${i.id.slice(0, 64)}`,
    'terminology.instance-not-found',
  );
}

/** `system|code`-style texts kept short in messages. */
export const cut = (s: string, n = 200): string => (s.length > n ? `${s.slice(0, n)}…` : s);

/** A Parameters answer: each entry a parameter (undefined values left out). */
export function parameters(list: (Json | undefined)[]): Resource {
  return { resourceType: 'Parameters', parameter: list.filter((p) => p !== undefined) };
}

/**
 * The code system of a CodeSystem operation: the instance at instance level, else the one `system` (and `version`)
 * names; 400 without one, 404 when unknown.
 */
export async function codeSystemTarget(
  env: OperationEnv,
  i: OperationInput,
  op: string,
  system: string | undefined,
  version: string | undefined,
): Promise<CodeSystemIndex> {
  const t = terminologyOf(env);
  if (i.id !== '') {
    const { resource } = await instanceTarget(env, i, 'CodeSystem');
    const cs = t.compileStored(resource);
    if (system !== undefined && system !== cs.url)
      throw new FhirError('invalid', `The system ${cut(system)} is not this code system's`, `${op}.system`);
    return cs;
  }
  if (system === undefined || system === '')
    throw new FhirError('invalid', `$${op} needs a system (or a coding with one)`, `${op}.no-system`);
  const cs = await t.codeSystem(atOf(i), system, version);
  if (!cs)
    throw new FhirError(
      'not-found',
      `Unknown code system: ${cut(version ? `${system}|${version}` : system)}`,
      `${op}.unknown-system`,
    );
  return cs;
}
