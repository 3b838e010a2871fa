// CodeSystem/$validate-code (https://hl7.org/fhir/R4/codesystem-operation-validate-code.html, API.md §9): whether a
// code (`code`, a `coding`, or any coding of a `codeableConcept`) is in a code system (`url` + `version`, the coding's
// system, or the instance), its `display` checked against the display and designations when given. Answers Parameters
// `result`, `message`, `display`. Unknown code system: 404.
import type { Coding, ValidateCodeResult } from '../conformance/model.js';
import type { CodeSystemIndex } from '../conformance/terminology/index.js';
import type { OperationDefinition } from './operation.js';
import { answer, codingsOf } from './valueset-validate-code.js';
import { assertReadable, codeSystemTarget, cut, txParams, type Kind } from './terminology-params.js';

const KINDS: Record<string, Kind> = {
  url: 'text',
  version: 'text',
  code: 'text',
  display: 'text',
  coding: 'coding',
  codeableConcept: 'concept',
};

function check(cs: CodeSystemIndex, c: Coding): ValidateCodeResult {
  const what = cut(`${c.system ?? cs.url}#${c.code ?? ''}`);
  if (c.system !== undefined && c.system !== cs.url)
    return { result: false, message: `The code ${what} is not of the code system ${cut(cs.url)}` };
  const at = cs.find(c.code ?? '');
  const concept = at === undefined ? undefined : cs.concepts[at];
  if (!concept)
    return { result: false, message: `The code ${what} is not in the code system ${cut(cs.url)}` };
  const display = concept.display;
  const names = [display, ...concept.designations.map((d) => d.value)].filter((d) => typeof d === 'string');
  if (c.display !== undefined && names.length > 0 && !names.includes(c.display))
    return {
      result: false,
      message: `The display "${cut(c.display)}" is not a display of ${what}${display ? ` ("${display}")` : ''}`,
      ...(display !== undefined ? { display } : {}),
    };
  return { result: true, ...(display !== undefined ? { display } : {}) };
}

export const codeSystemValidateCodeOperation: OperationDefinition = {
  code: 'validate-code',
  level: 'type',
  types: ['CodeSystem'],
  affectsState: false,
  definition: 'http://hl7.org/fhir/OperationDefinition/CodeSystem-validate-code',
  async run(env, i) {
    assertReadable(i, ['CodeSystem']);
    const p = txParams(i, 'validate-code', KINDS);
    const codings = codingsOf(p, 'url');
    const system = p.text('url') ?? (i.id === '' ? codings.find((c) => c.system)?.system : undefined);
    const cs = await codeSystemTarget(env, i, 'validate-code', system, p.text('version'));
    // `code` with `url`: the code is the url's.
    const results = codings.map((c) =>
      check(cs, p.text('code') !== undefined ? { ...c, system: cs.url } : c),
    );
    return { status: 200, body: answer(results) };
  },
};

export const codeSystemValidateCodeInstanceOperation: OperationDefinition = {
  ...codeSystemValidateCodeOperation,
  level: 'instance',
};
