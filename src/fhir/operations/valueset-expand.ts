// ValueSet/$expand (https://hl7.org/fhir/R4/valueset-operation-expand.html, API.md §9): GET or POST at type level (a
// value set by `url`, or given inline as `valueSet` in a POST) and instance level; `filter` (text in code or display)
// and `activeOnly` (no inactive codes) narrow, `offset` and `count` page the codes. Answers the ValueSet with its `expansion` (identifier, timestamp, total of the
// codes matching, offset, parameters, contains). Too many codes: 422 `too-costly`, never a partial expansion.
import { randomUUID } from 'node:crypto';
import { FhirError } from '../outcome.js';
import type { Resource } from '../types.js';
import type { OperationDefinition, OperationEnv, OperationInput } from './operation.js';
import {
  assertReadable,
  atOf,
  cut,
  instanceTarget,
  terminologyOf,
  txParams,
  type Kind,
} from './terminology-params.js';

const KINDS: Record<string, Kind> = {
  url: 'text',
  valueSetVersion: 'text',
  valueSet: 'resource',
  filter: 'text',
  count: 'text',
  offset: 'text',
  activeOnly: 'text',
};

const bad = (text: string, code: string): FhirError => new FhirError('invalid', text, `expand.${code}`);

function whole(v: string | undefined, name: string): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d{1,9}$/.test(v)) throw bad(`${name} must be a non-negative integer`, name);
  return Number(v);
}

/** The value set to expand: `{ canonical }` (cached by identity) or an inline or instance resource. */
async function target(
  env: OperationEnv,
  i: OperationInput,
  p: ReturnType<typeof txParams>,
): Promise<{ resource: Resource; canonical?: string; at: ReturnType<typeof atOf> }> {
  const url = p.text('url');
  const inline = p.resource('valueSet');
  if (i.id !== '') {
    if (url !== undefined || inline)
      throw bad('url and valueSet are not taken at instance level', 'instance');
    return instanceTarget(env, i, 'ValueSet');
  }
  if (url !== undefined && inline) throw bad('Give url or valueSet, not both', 'both');
  if (inline) {
    if (inline.resourceType !== 'ValueSet') throw bad('valueSet must be a ValueSet resource', 'inline');
    return { resource: inline, at: atOf(i) };
  }
  if (url === undefined || url === '') throw bad('$expand needs url (or valueSet in a POST)', 'no-url');
  const version = p.text('valueSetVersion');
  const canonical = version ? `${url}|${version}` : url;
  const at = atOf(i);
  const resource = await env.conformance.resolver.resolve(at, 'ValueSet', canonical);
  if (!resource) throw new FhirError('not-found', `Unknown value set: ${cut(canonical)}`, 'expand.not-found');
  return { resource, canonical, at };
}

async function expand(env: OperationEnv, i: OperationInput) {
  assertReadable(i, ['ValueSet', 'CodeSystem']);
  const p = txParams(i, 'expand', KINDS);
  const count = whole(p.text('count'), 'count');
  const offset = whole(p.text('offset'), 'offset') ?? 0;
  const filter = p.text('filter');
  const activeText = p.text('activeOnly');
  if (activeText !== undefined && activeText !== 'true' && activeText !== 'false')
    throw bad('activeOnly must be true or false', 'active-only');
  const activeOnly = activeText === 'true';
  const vs = await target(env, i, p);
  const e = await terminologyOf(env).expand(vs.at, vs.canonical ?? vs.resource, {
    ...(filter ? { filter } : {}),
    offset,
    ...(count !== undefined ? { count } : {}),
    ...(activeOnly ? { activeOnly } : {}),
  });
  if (!e) throw new FhirError('not-found', 'Unknown value set', 'expand.gone');
  const parameter = [
    ...(filter ? [{ name: 'filter', valueString: filter }] : []),
    ...(count !== undefined ? [{ name: 'count', valueInteger: count }] : []),
    { name: 'offset', valueInteger: offset },
    ...(activeOnly ? [{ name: 'activeOnly', valueBoolean: true }] : []),
  ];
  const { text: _text, ...rest } = vs.resource;
  const expansion = {
    identifier: `urn:uuid:${randomUUID()}`,
    timestamp: i.ctx.clock().toISOString(),
    total: e.total,
    offset,
    parameter,
    // FHIR JSON has no empty arrays.
    ...(e.contains.length > 0 ? { contains: e.contains } : {}),
  };
  return { status: 200, body: { ...rest, resourceType: 'ValueSet', expansion } };
}

export const valueSetExpandOperation: OperationDefinition = {
  code: 'expand',
  level: 'type',
  types: ['ValueSet'],
  affectsState: false,
  definition: 'http://hl7.org/fhir/OperationDefinition/ValueSet-expand',
  run: expand,
};

export const valueSetExpandInstanceOperation: OperationDefinition = {
  ...valueSetExpandOperation,
  level: 'instance',
};
