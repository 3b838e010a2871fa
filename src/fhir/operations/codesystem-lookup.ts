// CodeSystem/$lookup (https://hl7.org/fhir/R4/codesystem-operation-lookup.html, API.md §9): a code's details — `name`
// and `version` of its code system, `display`, `definition`, each `designation` (language, use, value) and each
// `property` (code, value), with its `parent`s and `child`ren in the hierarchy — from `system` + `code` (+ `version`)
// or a `coding`, at type level or on a CodeSystem instance. Unknown code system or code: 404.
import type { Coding } from '../conformance/model.js';
import type { CodeSystemIndex } from '../conformance/terminology/index.js';
import { FhirError } from '../outcome.js';
import type { OperationDefinition } from './operation.js';
import {
  assertReadable,
  codeSystemTarget,
  cut,
  parameters,
  txParams,
  type Kind,
} from './terminology-params.js';

const KINDS: Record<string, Kind> = { system: 'text', code: 'text', version: 'text', coding: 'coding' };
const HIERARCHY = new Set(['parent', 'child']);

const property = (code: string, value: Record<string, unknown>) => ({
  name: 'property',
  part: [
    { name: 'code', valueCode: code },
    { name: 'value', ...value },
  ],
});

function details(cs: CodeSystemIndex, at: number) {
  const c = cs.concepts[at] as CodeSystemIndex['concepts'][number];
  const code = (k: number): string => cs.concepts[k]?.code as string;
  return parameters([
    { name: 'name', valueString: cs.name ?? cs.url },
    cs.version !== undefined ? { name: 'version', valueString: cs.version } : undefined,
    c.display !== undefined ? { name: 'display', valueString: c.display } : undefined,
    c.definition !== undefined ? { name: 'definition', valueString: c.definition } : undefined,
    ...c.designations.map((d) => ({
      name: 'designation',
      part: [
        ...(typeof d.language === 'string' ? [{ name: 'language', valueCode: d.language }] : []),
        ...(d.use && typeof d.use === 'object' ? [{ name: 'use', valueCoding: d.use }] : []),
        { name: 'value', valueString: typeof d.value === 'string' ? d.value : '' },
      ],
    })),
    ...c.properties.filter((p) => !HIERARCHY.has(p.code)).map((p) => property(p.code, { [p.type]: p.value })),
    ...cs.parents(at).map((k) => property('parent', { valueCode: code(k) })),
    ...cs.children(at).map((k) => property('child', { valueCode: code(k) })),
  ]);
}

export const codeSystemLookupOperation: OperationDefinition = {
  code: 'lookup',
  level: 'type',
  types: ['CodeSystem'],
  affectsState: false,
  definition: 'http://hl7.org/fhir/OperationDefinition/CodeSystem-lookup',
  async run(env, i) {
    assertReadable(i, ['CodeSystem']);
    const p = txParams(i, 'lookup', KINDS);
    const coding: Coding = p.coding('coding') ?? {};
    const code = p.text('code') ?? coding.code;
    if (code === undefined || code === '')
      throw new FhirError('invalid', '$lookup needs a code (or a coding with one)', 'lookup.no-code');
    const system = p.text('system') ?? coding.system;
    const cs = await codeSystemTarget(env, i, 'lookup', system, p.text('version') ?? coding.version);
    const at = cs.find(code);
    if (at === undefined)
      throw new FhirError(
        'not-found',
        `The code ${cut(code)} is not in ${cut(cs.url)}`,
        'lookup.unknown-code',
      );
    return { status: 200, body: details(cs, at) };
  },
};

export const codeSystemLookupInstanceOperation: OperationDefinition = {
  ...codeSystemLookupOperation,
  level: 'instance',
};
