// ConceptMap/$translate (https://hl7.org/fhir/R4/conceptmap-operation-translate.html, API.md §9): what a code (`code`
// + `system`, a `coding`, or each coding of a `codeableConcept`) maps to, by the ConceptMap `url` names (or given
// inline as `conceptMap`, or the instance), else by every ConceptMap of the caller's project and the shared set whose
// `source`/`target` value sets match; `targetsystem` narrows, `reverse` maps target codes back. Answers Parameters
// `result` (a match that is neither unmatched nor disjoint), `message`, and each `match` (equivalence, concept, source).
import type { Coding } from '../conformance/model.js';
import { isMapped, translate, type Match } from '../conformance/terminology/translate.js';
import { parseJson } from '../json/parse.js';
import { FhirError } from '../outcome.js';
import type { Resource } from '../types.js';
import type { OperationDefinition, OperationEnv, OperationInput } from './operation.js';
import {
  assertReadable,
  atOf,
  cut,
  instanceTarget,
  parameters,
  txParams,
  type Kind,
  type TxParams,
} from './terminology-params.js';

const KINDS: Record<string, Kind> = {
  url: 'text',
  conceptMapVersion: 'text',
  conceptMap: 'resource',
  system: 'text',
  version: 'text',
  code: 'text',
  coding: 'coding',
  codeableConcept: 'concept',
  source: 'text',
  target: 'text',
  targetsystem: 'text',
  reverse: 'text',
};
/** ConceptMaps of a project searched when none is named. */
const MAX_MAPS = 200;

const bad = (text: string, code: string): FhirError => new FhirError('invalid', text, `translate.${code}`);

const valueSetOf = (cm: Resource, side: 'source' | 'target'): unknown =>
  cm[`${side}Uri`] ?? cm[`${side}Canonical`];

/** The ConceptMaps to apply. */
async function maps(env: OperationEnv, i: OperationInput, p: TxParams): Promise<Resource[]> {
  const url = p.text('url');
  const inline = p.resource('conceptMap');
  if (i.id !== '') {
    if (url !== undefined || inline)
      throw bad('url and conceptMap are not taken at instance level', 'instance');
    return [(await instanceTarget(env, i, 'ConceptMap')).resource];
  }
  if (url !== undefined && inline) throw bad('Give url or conceptMap, not both', 'both');
  if (inline) {
    if (inline.resourceType !== 'ConceptMap') throw bad('conceptMap must be a ConceptMap resource', 'inline');
    return [inline];
  }
  if (url) {
    const version = p.text('conceptMapVersion');
    const canonical = version ? `${url}|${version}` : url;
    const cm = await env.conformance.resolver.resolve(atOf(i), 'ConceptMap', canonical);
    if (!cm)
      throw new FhirError('not-found', `Unknown concept map: ${cut(canonical)}`, 'translate.not-found');
    return [cm];
  }
  const r = await env.db.query<{ json: string }>(
    `SELECT content::text AS json FROM resources WHERE resource_type = 'ConceptMap' AND project_id = $1
     AND NOT deleted ORDER BY last_updated DESC LIMIT ${MAX_MAPS}`,
    [i.ctx.actor.projectId],
  );
  const all = [
    ...r.rows.map((x) => parseJson(x.json) as Resource),
    ...env.conformance.shared.all('ConceptMap'),
  ];
  const source = p.text('source');
  const target = p.text('target');
  return all.filter(
    (cm) =>
      (source === undefined || valueSetOf(cm, 'source') === source) &&
      (target === undefined || valueSetOf(cm, 'target') === target),
  );
}

function codings(p: TxParams): Coding[] {
  const code = p.text('code');
  const system = p.text('system');
  const version = p.text('version');
  const list =
    code !== undefined
      ? [{ code, ...(system !== undefined ? { system } : {}), ...(version !== undefined ? { version } : {}) }]
      : p.coding('coding')
        ? [p.coding('coding') as Coding]
        : (p.concept('codeableConcept') ?? []);
  if (list.length === 0 || list.some((c) => !c.code))
    throw bad('$translate needs a code, a coding or a codeableConcept (with a code)', 'no-code');
  return list;
}

const matchParameter = (m: Match) => ({
  name: 'match',
  part: [
    { name: 'equivalence', valueCode: m.equivalence },
    { name: 'concept', valueCoding: m.concept },
    ...(m.source ? [{ name: 'source', valueUri: m.source }] : []),
  ],
});

export const conceptMapTranslateOperation: OperationDefinition = {
  code: 'translate',
  level: 'type',
  types: ['ConceptMap'],
  affectsState: false,
  definition: 'http://hl7.org/fhir/OperationDefinition/ConceptMap-translate',
  async run(env, i) {
    assertReadable(i, ['ConceptMap']);
    const p = txParams(i, 'translate', KINDS);
    const reverseText = p.text('reverse');
    if (reverseText !== undefined && reverseText !== 'true' && reverseText !== 'false')
      throw bad('reverse must be true or false', 'reverse');
    const asked = codings(p);
    const targetSystem = p.text('targetsystem');
    const matches: Match[] = [];
    for (const cm of await maps(env, i, p))
      for (const c of asked)
        matches.push(
          ...translate(cm, {
            code: c.code as string,
            ...(c.system !== undefined ? { system: c.system } : {}),
            ...(targetSystem !== undefined ? { targetSystem } : {}),
            reverse: reverseText === 'true',
          }),
        );
    const result = matches.some(isMapped);
    const what = asked.map((c) => `${c.system ?? ''}#${c.code ?? ''}`).join(', ');
    return {
      status: 200,
      body: parameters([
        { name: 'result', valueBoolean: result },
        result ? undefined : { name: 'message', valueString: `No mapping found for ${cut(what)}` },
        ...matches.map(matchParameter),
      ]),
    };
  },
};

export const conceptMapTranslateInstanceOperation: OperationDefinition = {
  ...conceptMapTranslateOperation,
  level: 'instance',
};
