// The filters of a topic-based Subscription: the Backport IG's backport-filter-criteria extensions on
// Subscription.criteria, each a search on one of the topic's types, allowed only as the topic's canFilterBy lists.
// https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/components.html#subscription-filters and
// https://hl7.org/fhir/R5/subscriptiontopic.html (canFilterBy)
import { isResourceType } from '../definitions/index.js';
import { FhirError } from '../outcome.js';
import { getSearchParam, searchParamsOf } from '../search/registry.js';
import type { Resource } from '../types.js';
import { EXT, type TopicFilter } from './model.js';
import type { CompileCriteria, CompiledTopic, TopicFilterRule } from './topic.js';

const PREFIXES = /^(eq|ne|gt|lt|ge|le|sa|eb|ap)(?=[0-9-])/;
const PREFIXED_TYPES: ReadonlySet<string> = new Set(['number', 'date', 'quantity']);

const refuse = (message: string, code: string, at: string): FhirError =>
  new FhirError('invalid', message, `subscription.${code}`, { expression: [at] });

/** The filter strings of a Subscription: `_criteria.extension` valueStrings with the backport-filter-criteria URL. */
export function filterCriteria(subscription: Resource): string[] {
  const element = subscription._criteria as
    { extension?: { url?: unknown; valueString?: unknown }[] } | undefined;
  const out: string[] = [];
  for (const ext of element?.extension ?? []) {
    if (ext?.url === EXT.filterCriteria && typeof ext.valueString === 'string') out.push(ext.valueString);
  }
  return out;
}

/** The rules of `topic` that allow `name` on `type`. */
function rulesFor(topic: CompiledTopic, type: string, name: string): TopicFilterRule[] {
  return topic.canFilterBy.filter(
    (r) => r.filterParameter === name && (r.resourceType === undefined || r.resourceType === type),
  );
}

/**
 * The type a filter applies to and its query: `Type?query`, `Type.param=value` (the IG's text form), or a bare
 * `param=value` when the topic has one type or its canFilterBy names one type for that parameter.
 */
function splitFilter(value: string, topic: CompiledTopic, at: string): { type: string; query: string } {
  const q = value.indexOf('?');
  if (q >= 0) return { type: value.slice(0, q), query: value.slice(q + 1) };
  const dot = /^([A-Z][A-Za-z]+)\.(.+)$/.exec(value);
  if (dot && isResourceType(dot[1] as string)) return { type: dot[1] as string, query: dot[2] as string };
  if (topic.resourceTypes.length === 1) return { type: topic.resourceTypes[0] as string, query: value };
  const name = (value.split('=')[0] ?? '').split(':')[0] ?? '';
  const types = new Set(
    topic.canFilterBy.filter((r) => r.filterParameter === name).map((r) => r.resourceType),
  );
  if (types.size === 1 && !types.has(undefined)) return { type: [...types][0] as string, query: value };
  throw refuse(
    `Filter '${value}' must name its resource type (Type?${value}): the topic has several`,
    'filter-type',
    at,
  );
}

/** The search parameter code a rule stands for on `type`: the one its filterDefinition names, else its own name. */
function searchCode(rule: TopicFilterRule, type: string): string {
  if (rule.filterDefinition) {
    const defined = searchParamsOf(type).find((p) => p.url === rule.filterDefinition);
    if (defined) return defined.code;
  }
  return rule.filterParameter;
}

/** Checks one `name[:modifier]=value` of a filter against the topic's rules; returns it with the search code. */
function allowedPart(part: string, type: string, topic: CompiledTopic, value: string, at: string): string {
  const eq = part.indexOf('=');
  if (eq <= 0) throw refuse(`Filter '${value}' is not of the form param=value`, 'filter-syntax', at);
  const key = part.slice(0, eq);
  const colon = key.indexOf(':');
  const name = colon >= 0 ? key.slice(0, colon) : key;
  const modifier = colon >= 0 ? key.slice(colon + 1) : undefined;
  const rules = rulesFor(topic, type, name);
  const rule = rules[0];
  if (!rule) {
    throw refuse(
      `Filter '${value}': the topic ${topic.url} does not allow filtering ${type} by '${name}'`,
      'filter-not-allowed',
      at,
    );
  }
  if (modifier !== undefined && !rules.some((r) => r.modifiers.includes(modifier))) {
    throw refuse(
      `Filter '${value}': the topic ${topic.url} does not allow the modifier ':${modifier}' on '${name}'`,
      'filter-modifier-not-allowed',
      at,
    );
  }
  const code = searchCode(rule, type);
  const paramType = getSearchParam(type, code)?.type;
  if (paramType && PREFIXED_TYPES.has(paramType)) {
    for (const v of part.slice(eq + 1).split(',')) {
      const prefix = PREFIXES.exec(decodeURIComponentSafe(v))?.[1];
      if (prefix && prefix !== 'eq' && !rules.some((r) => r.comparators.includes(prefix))) {
        throw refuse(
          `Filter '${value}': the topic ${topic.url} does not allow the comparator '${prefix}' on '${name}'`,
          'filter-comparator-not-allowed',
          at,
        );
      }
    }
  }
  return `${code}${modifier !== undefined ? `:${modifier}` : ''}${part.slice(eq)}`;
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/**
 * The filters of a topic-based Subscription (its backport-filter-criteria values), each compiled with `compile` for
 * its type. A filter is refused (400) when its parameter, modifier or comparator is not among the topic's canFilterBy
 * (`subscription.filter-not-allowed`, `-modifier-not-allowed`, `-comparator-not-allowed`), when its type is not one of
 * the topic's (`subscription.filter-type`), or when it does not compile (`subscription.filter-invalid`).
 */
export function compileFilters(
  subscription: Resource,
  topic: CompiledTopic,
  compile: CompileCriteria,
): TopicFilter[] {
  return filterCriteria(subscription).map((raw, i) => {
    const at = `Subscription.criteria.extension[${i}]`;
    const value = raw.trim();
    const { type, query } = splitFilter(value, topic, at);
    const filterTypes = new Set([
      ...topic.resourceTypes,
      ...topic.canFilterBy.flatMap((r) => (r.resourceType ? [r.resourceType] : [])),
    ]);
    if (!filterTypes.has(type)) {
      throw refuse(
        `Filter '${value}' is on ${type}, which the topic ${topic.url} is not about`,
        'filter-type',
        at,
      );
    }
    const parts = query.split('&').filter((p) => p !== '');
    if (parts.length === 0) throw refuse(`Filter '${value}' is empty`, 'filter-syntax', at);
    const rewritten = parts.map((p) => allowedPart(p, type, topic, value, at)).join('&');
    try {
      return { resourceType: type, criteria: compile(rewritten, type) };
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      throw refuse(`Filter '${value}' cannot be used as a search on ${type}: ${why}`, 'filter-invalid', at);
    }
  });
}

/**
 * True when `resource` passes every filter on its type (filters are AND-joined, as the IG says); filters on the
 * topic's other types do not apply to it.
 */
export function filtersMatch(filters: readonly TopicFilter[], resource: Resource): boolean {
  for (const f of filters) {
    if (f.resourceType === resource.resourceType && !f.criteria.matches(resource)) return false;
  }
  return true;
}
