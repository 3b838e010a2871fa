// A SubscriptionTopic compiled once into what a write is matched against: its resource triggers (type, interactions,
// queryCriteria on the previous and current versions, fhirPathCriteria). https://hl7.org/fhir/R5/subscriptiontopic.html
// and the Subscriptions R5 Backport IG, https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/components.html
import { isResourceType } from '../definitions/index.js';
import { FhirError } from '../outcome.js';
import type { Resource } from '../types.js';
import type { CompiledCriteria, TriggerInteraction, WriteChange } from './model.js';
import { compileFhirPathCriteria } from './topic-fhirpath.js';

export type CompileCriteria = (query: string, resourceType: string) => CompiledCriteria;

/** One `canFilterBy` of a topic: a filter parameter subscriptions may use (topic-filters.ts). */
export interface TopicFilterRule {
  /** The resource type it applies to; undefined: any of the topic's types. */
  resourceType?: string;
  filterParameter: string;
  /** A SearchParameter canonical (or a shared filter concept URI) the parameter stands for. */
  filterDefinition?: string;
  modifiers: readonly string[];
  comparators: readonly string[];
}

export interface CompiledTopic {
  url: string;
  version?: string;
  /** The types its resource triggers name, each once. */
  resourceTypes: readonly string[];
  canFilterBy: readonly TopicFilterRule[];
  /** True when a resource trigger of the topic fires for this change (triggers are OR-joined). */
  triggers(change: WriteChange): boolean;
}

const INTERACTIONS: ReadonlySet<string> = new Set<TriggerInteraction>(['create', 'update', 'delete']);
const RESULT_CODES: ReadonlySet<string> = new Set(['test-passes', 'test-fails']);
const STRUCTURE_DEFINITION = 'http://hl7.org/fhir/StructureDefinition/';
const invalid = (message: string, code: string, expression: string): FhirError =>
  new FhirError('processing', message, `subscription.topic-${code}`, {
    status: 422,
    expression: [expression],
  });

/** The resource type a `resource` element names: `Encounter` or `http://hl7.org/fhir/StructureDefinition/Encounter`. */
export function topicResourceType(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const name = value.startsWith(STRUCTURE_DEFINITION) ? value.slice(STRUCTURE_DEFINITION.length) : value;
  return isResourceType(name) ? name : undefined;
}

type Test = (version: Resource) => boolean;
type Side = { test: Test; missing: 'test-passes' | 'test-fails' | undefined };

/** One side of `queryCriteria`: a search without the base (`status=finished`, or `Encounter?status=finished`). */
function compileQuery(query: string, type: string, compile: CompileCriteria, at: string): Test {
  let text = query.trim().replace(/^\//, '');
  const q = text.indexOf('?');
  if (q >= 0) {
    const prefix = text.slice(0, q);
    if (prefix !== '' && prefix !== type) {
      throw invalid(`${at} searches ${prefix}, not the trigger's resource ${type}`, 'criteria-type', at);
    }
    text = text.slice(q + 1);
  }
  if (text === '') throw invalid(`${at} is empty`, 'criteria-empty', at);
  let compiled: CompiledCriteria;
  try {
    compiled = compile(text, type);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw invalid(`${at} cannot be used as a search on ${type}: ${why}`, 'criteria', at);
  }
  return (version) => {
    try {
      return compiled.matches(version);
    } catch {
      return false; // a version the matcher cannot read matches nothing; the write goes on
    }
  };
}

function resultCode(value: unknown, at: string): 'test-passes' | 'test-fails' | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !RESULT_CODES.has(value)) {
    throw invalid(`${at} must be test-passes or test-fails`, 'result-code', at);
  }
  return value as 'test-passes' | 'test-fails';
}

/**
 * queryCriteria as the R5 page says: `previous` is tested on the version the change replaces and `current` on the
 * version it writes; where a version is missing (create: previous, delete: current) resultForCreate/resultForDelete
 * stands for the test, and without one that side is not tested (the other decides). requireBoth: every tested side
 * must pass; otherwise one passing side is enough. A change where no side is tested does not match; criteria with
 * neither `previous` nor `current` do not constrain.
 */
function compileQueryCriteria(
  raw: Record<string, unknown>,
  type: string,
  compile: CompileCriteria,
  at: string,
): (change: WriteChange) => boolean {
  const forCreate = resultCode(raw.resultForCreate, `${at}.resultForCreate`);
  const forDelete = resultCode(raw.resultForDelete, `${at}.resultForDelete`);
  const side = (key: 'previous' | 'current', missing: Side['missing']): Side | undefined => {
    const value = raw[key];
    if (value === undefined) return undefined;
    if (typeof value !== 'string') {
      throw invalid(`${at}.${key} must be a string`, 'criteria-string', `${at}.${key}`);
    }
    return { test: compileQuery(value, type, compile, `${at}.${key}`), missing };
  };
  const previous = side('previous', forCreate);
  const current = side('current', forDelete);
  const requireBoth = raw.requireBoth === true;
  if (!previous && !current) return () => true;
  const outcome = (s: Side | undefined, version: Resource | null): boolean | undefined => {
    if (!s) return undefined;
    if (version) return s.test(version);
    return s.missing === undefined ? undefined : s.missing === 'test-passes';
  };
  return (change) => {
    const results = [outcome(previous, change.previous), outcome(current, change.current)].filter(
      (r): r is boolean => r !== undefined,
    );
    if (results.length === 0) return false;
    return requireBoth ? results.every(Boolean) : results.some(Boolean);
  };
}

function compileTrigger(
  raw: Record<string, unknown>,
  compile: CompileCriteria,
  at: string,
): { type: string; fires: (change: WriteChange) => boolean } {
  const type = topicResourceType(raw.resource);
  if (!type) {
    throw invalid(
      `${at}.resource must name a resource type Cinder supports (got ${JSON.stringify(raw.resource)})`,
      'resource',
      `${at}.resource`,
    );
  }
  const list = raw.supportedInteraction;
  if (list !== undefined && !Array.isArray(list)) {
    throw invalid(
      `${at}.supportedInteraction must be a list`,
      'interaction-list',
      `${at}.supportedInteraction`,
    );
  }
  const interactions = new Set<string>();
  for (const [i, v] of (list ?? []).entries()) {
    if (typeof v !== 'string' || !INTERACTIONS.has(v)) {
      const where = `${at}.supportedInteraction[${i}]`;
      throw invalid(`${where} must be create, update or delete`, 'interaction', where);
    }
    interactions.add(v);
  }
  const checks: ((change: WriteChange) => boolean)[] = [];
  if (raw.queryCriteria !== undefined) {
    if (typeof raw.queryCriteria !== 'object' || raw.queryCriteria === null) {
      throw invalid(`${at}.queryCriteria must be an object`, 'criteria-object', `${at}.queryCriteria`);
    }
    checks.push(
      compileQueryCriteria(
        raw.queryCriteria as Record<string, unknown>,
        type,
        compile,
        `${at}.queryCriteria`,
      ),
    );
  }
  if (raw.fhirPathCriteria !== undefined) {
    checks.push(compileFhirPathCriteria(raw.fhirPathCriteria, type, `${at}.fhirPathCriteria`));
  }
  return {
    type,
    fires: (change) =>
      change.resourceType === type &&
      (interactions.size === 0 || interactions.has(change.interaction)) &&
      checks.every((check) => check(change)),
  };
}

function compileFilterRules(raw: unknown): TopicFilterRule[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) {
    const at = 'SubscriptionTopic.canFilterBy';
    throw invalid(`${at} must be a list`, 'can-filter-by', at);
  }
  return raw.map((entry: Record<string, unknown>, i) => {
    const at = `SubscriptionTopic.canFilterBy[${i}]`;
    let resourceType: string | undefined;
    if (entry?.resource !== undefined) {
      resourceType = topicResourceType(entry.resource);
      if (!resourceType) {
        throw invalid(
          `${at}.resource must name a resource type Cinder supports`,
          'filter-resource',
          `${at}.resource`,
        );
      }
    }
    const name = entry?.filterParameter;
    if (typeof name !== 'string' || !/^[A-Za-z0-9_.-]+$/.test(name)) {
      throw invalid(
        `${at}.filterParameter must be a parameter name without modifiers`,
        'filter-parameter',
        `${at}.filterParameter`,
      );
    }
    const strings = (v: unknown): string[] =>
      Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
    return {
      ...(resourceType ? { resourceType } : {}),
      filterParameter: name,
      ...(typeof entry.filterDefinition === 'string' ? { filterDefinition: entry.filterDefinition } : {}),
      modifiers: strings(entry.modifier),
      comparators: strings(entry.comparator),
    };
  });
}

/**
 * Compiles a SubscriptionTopic (a stored resource, validated against R5's structure) with `compile` for its search
 * criteria. Throws a 422 FhirError (`subscription.topic-*`, naming the element) for a topic Cinder cannot run: no
 * resourceTrigger (eventTrigger alone is not supported: Cinder has no named events), an unknown resource type or
 * interaction, criteria that do not compile, a FHIRPath that does not parse, names an unknown function or variable, or
 * uses a function refused on the write path (topic-fhirpath.ts). Search criteria and FHIRPath are compiled here once;
 * `triggers` only evaluates, and an evaluation error is no match.
 */
export function compileTopic(topic: Resource, compile: CompileCriteria): CompiledTopic {
  if (topic.resourceType !== 'SubscriptionTopic') {
    throw invalid(`A ${topic.resourceType} is not a SubscriptionTopic`, 'type', topic.resourceType);
  }
  if (typeof topic.url !== 'string' || topic.url === '') {
    throw invalid('SubscriptionTopic.url is required', 'url', 'SubscriptionTopic.url');
  }
  const raw = topic.resourceTrigger;
  if (!Array.isArray(raw) || raw.length === 0) {
    throw invalid(
      'SubscriptionTopic needs at least one resourceTrigger (eventTrigger is not supported)',
      'no-trigger',
      'SubscriptionTopic.resourceTrigger',
    );
  }
  const triggers = raw.map((t: Record<string, unknown>, i) =>
    compileTrigger(t ?? {}, compile, `SubscriptionTopic.resourceTrigger[${i}]`),
  );
  return {
    url: topic.url,
    ...(typeof topic.version === 'string' ? { version: topic.version } : {}),
    resourceTypes: [...new Set(triggers.map((t) => t.type))],
    canFilterBy: compileFilterRules(topic.canFilterBy),
    triggers: (change) => triggers.some((t) => t.fires(change)),
  };
}
