// CodeSystem/$subsumes (https://hl7.org/fhir/R4/codesystem-operation-subsumes.html, API.md §9): how code A relates to
// code B in a code system's hierarchy — `equivalent`, `subsumes` (A is an ancestor of B), `subsumed-by` or
// `not-subsumed` — from `codeA`/`codeB` with `system` (+ `version`), or `codingA`/`codingB`, at type level or on a
// CodeSystem instance. Unknown code system: 404; a code it does not hold: 400.
import type { Coding } from '../conformance/model.js';
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

const KINDS: Record<string, Kind> = {
  codeA: 'text',
  codeB: 'text',
  system: 'text',
  version: 'text',
  codingA: 'coding',
  codingB: 'coding',
};

const bad = (text: string, code: string): FhirError => new FhirError('invalid', text, `subsumes.${code}`);

export const codeSystemSubsumesOperation: OperationDefinition = {
  code: 'subsumes',
  level: 'type',
  types: ['CodeSystem'],
  affectsState: false,
  definition: 'http://hl7.org/fhir/OperationDefinition/CodeSystem-subsumes',
  async run(env, i) {
    assertReadable(i, ['CodeSystem']);
    const p = txParams(i, 'subsumes', KINDS);
    const side = (n: 'A' | 'B'): Coding => {
      const code = p.text(`code${n}`);
      const c = code !== undefined ? { code } : p.coding(`coding${n}`);
      if (!c?.code) throw bad(`$subsumes needs code${n} or coding${n}`, 'no-code');
      return c;
    };
    const a = side('A');
    const b = side('B');
    const system = p.text('system') ?? a.system ?? b.system;
    for (const c of [a, b])
      if (c.system !== undefined && system !== undefined && c.system !== system)
        throw bad('codingA and codingB must be of the same code system', 'systems');
    const cs = await codeSystemTarget(env, i, 'subsumes', system, p.text('version') ?? a.version);
    const at = (c: Coding): number => {
      const k = cs.find(c.code as string);
      if (k === undefined)
        throw bad(`The code ${cut(c.code as string)} is not in ${cut(cs.url)}`, 'unknown-code');
      return k;
    };
    const ia = at(a);
    const ib = at(b);
    const outcome =
      ia === ib
        ? 'equivalent'
        : cs.subsumes(ia, ib)
          ? 'subsumes'
          : cs.subsumes(ib, ia)
            ? 'subsumed-by'
            : 'not-subsumed';
    return { status: 200, body: parameters([{ name: 'outcome', valueCode: outcome }]) };
  },
};

export const codeSystemSubsumesInstanceOperation: OperationDefinition = {
  ...codeSystemSubsumesOperation,
  level: 'instance',
};
