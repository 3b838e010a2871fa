// ValueSet/$validate-code (https://hl7.org/fhir/R4/valueset-operation-validate-code.html, API.md §9): whether a code
// (`code` + `system`, a `coding`, or any coding of a `codeableConcept`) is in a value set (`url`, an inline `valueSet`
// in a POST, or the instance), its `display` checked when given. Answers Parameters `result`, `message`, `display`.
// Unknown value set: 404; one that cannot be expanded (an unknown code system, too many codes): 422.
import type { Coding, ValidateCodeResult } from '../conformance/model.js';
import { FhirError } from '../outcome.js';
import type { Resource } from '../types.js';
import type { OperationDefinition, OperationEnv, OperationInput } from './operation.js';
import {
  assertReadable,
  atOf,
  cut,
  instanceTarget,
  parameters,
  terminologyOf,
  txParams,
  type Kind,
  type TxParams,
} from './terminology-params.js';

const KINDS: Record<string, Kind> = {
  url: 'text',
  valueSetVersion: 'text',
  valueSet: 'resource',
  code: 'text',
  system: 'text',
  systemVersion: 'text',
  display: 'text',
  coding: 'coding',
  codeableConcept: 'concept',
};

const bad = (text: string, code: string): FhirError =>
  new FhirError('invalid', text, `validate-code.${code}`);

/** The codings to check: `code` (+ system, display), else `coding`, else the `codeableConcept`'s; 400 for none. */
export function codingsOf(p: TxParams, systemName: string): Coding[] {
  const code = p.text('code');
  const text = (n: string): Record<string, string> => {
    const v = p.text(n);
    return v !== undefined ? { [n === systemName ? 'system' : n]: v } : {};
  };
  const list =
    code !== undefined
      ? [{ code, ...text(systemName), ...text('display') }]
      : p.coding('coding')
        ? [p.coding('coding') as Coding]
        : (p.concept('codeableConcept') ?? []);
  if (list.length === 0 || list.some((c) => !c.code))
    throw bad('$validate-code needs a code, a coding or a codeableConcept (with a code)', 'no-code');
  return list;
}

/** The first valid coding's answer, or every coding's message. */
export function answer(results: ValidateCodeResult[]): Resource {
  const ok = results.find((r) => r.result);
  const r = ok ?? {
    result: false,
    message: results
      .map((x) => x.message)
      .filter(Boolean)
      .join('; '),
    ...(results.find((x) => x.display) ? { display: results.find((x) => x.display)?.display } : {}),
  };
  return parameters([
    { name: 'result', valueBoolean: r.result },
    r.message ? { name: 'message', valueString: r.message } : undefined,
    r.display !== undefined ? { name: 'display', valueString: r.display } : undefined,
  ]);
}

async function valueSetOf(env: OperationEnv, i: OperationInput, p: TxParams) {
  const url = p.text('url');
  const inline = p.resource('valueSet');
  if (i.id !== '') {
    if (url !== undefined || inline)
      throw bad('url and valueSet are not taken at instance level', 'instance');
    const { resource, at } = await instanceTarget(env, i, 'ValueSet');
    return { vs: resource as string | Resource, at };
  }
  if (url !== undefined && inline) throw bad('Give url or valueSet, not both', 'both');
  if (inline) {
    if (inline.resourceType !== 'ValueSet') throw bad('valueSet must be a ValueSet resource', 'inline');
    return { vs: inline as string | Resource, at: atOf(i) };
  }
  if (!url) throw bad('$validate-code needs url (or valueSet in a POST)', 'no-url');
  const version = p.text('valueSetVersion');
  return { vs: version ? `${url}|${version}` : url, at: atOf(i) };
}

export const valueSetValidateCodeOperation: OperationDefinition = {
  code: 'validate-code',
  level: 'type',
  types: ['ValueSet'],
  affectsState: false,
  definition: 'http://hl7.org/fhir/OperationDefinition/ValueSet-validate-code',
  async run(env, i) {
    assertReadable(i, ['ValueSet', 'CodeSystem']);
    const p = txParams(i, 'validate-code', KINDS);
    const codings = codingsOf(p, 'system');
    const { vs, at } = await valueSetOf(env, i, p);
    const t = terminologyOf(env);
    // Expanded first: an unknown value set is a 404, one that cannot be expanded says why (422).
    if (!(await t.codes(at, vs)))
      throw new FhirError('not-found', `Unknown value set: ${cut(String(vs))}`, 'validate-code.not-found');
    const results: ValidateCodeResult[] = [];
    for (const c of codings) results.push((await t.validateCode(at, vs, c)) ?? { result: false });
    return { status: 200, body: answer(results) };
  },
};

export const valueSetValidateCodeInstanceOperation: OperationDefinition = {
  ...valueSetValidateCodeOperation,
  level: 'instance',
};
