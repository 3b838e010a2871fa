// The shapes the conformance module shares (API.md §9, https://hl7.org/fhir/R4/conformance-module.html): the
// conformance resource types, the shared read-only set, canonical resolution, terminology and profile validation as
// the rest of Cinder sees them. Implementations: shared-set.ts, resolver.ts, terminology/, profile/.
import type { Queryable } from '../../storage/db.js';
import type { OperationOutcomeIssue } from '../outcome.js';
import type { Resource } from '../types.js';

export const CONFORMANCE_TYPES = [
  'StructureDefinition',
  'ValueSet',
  'CodeSystem',
  'ConceptMap',
  'SearchParameter',
] as const;
export type ConformanceType = (typeof CONFORMANCE_TYPES)[number];

const TYPES: ReadonlySet<string> = new Set(CONFORMANCE_TYPES);
export const isConformanceType = (type: string): type is ConformanceType => TYPES.has(type);

/** A canonical reference split: `url` and, after `|`, `version` (https://hl7.org/fhir/R4/references.html#canonical). */
export function splitCanonical(canonical: string): { url: string; version?: string } {
  const bar = canonical.indexOf('|');
  if (bar < 0) return { url: canonical };
  const version = canonical.slice(bar + 1);
  return version ? { url: canonical.slice(0, bar), version } : { url: canonical.slice(0, bar) };
}

/**
 * The shared, read-only conformance resources every project sees: the R4 base definitions, value sets and code
 * systems, and the resources of the packages named in the configuration key `packages` (API.md §9).
 */
export interface SharedSet {
  /** By canonical: the given version, or without one the latest (by `version`, then load order). */
  byUrl(type: ConformanceType, url: string, version?: string): Resource | undefined;
  /** By logical id (a read of `<Type>/<id>`). */
  byId(type: ConformanceType, id: string): Resource | undefined;
  /** Every shared resource of a type, in a stable order (searches). */
  all(type: ConformanceType): Iterable<Resource>;
}

/**
 * Whose conformance resources a call sees: a project's own (then the shared set), or with `projectId: null` only the
 * shared set. `db` is the write's transaction when the call happens inside one (the embedded database has a single
 * connection, which the transaction holds); otherwise the service's own database.
 */
export interface At {
  projectId: string | null;
  db?: Queryable;
}

/** Canonical resolution: the caller's project first, then the shared set (API.md §9). */
export interface ConformanceResolver {
  resolve(at: At, type: ConformanceType, canonical: string): Promise<Resource | undefined>;
  /**
   * A short text that changes whenever what `resolve(at, type, canonical)` answers may have changed (equal stamps:
   * equal answers, "nothing" included), found without reading any resource's content. Optional: caches (terminology)
   * use it to check that what they compiled is still current.
   */
  stamp?(at: At, type: ConformanceType, canonical: string): Promise<string>;
}

export interface Coding {
  system?: string;
  version?: string;
  code?: string;
  display?: string;
}

export interface ExpansionContains {
  system: string;
  version?: string;
  code: string;
  display?: string;
  /** Not for current use (the concept's `inactive` property, or `status` retired). */
  inactive?: boolean;
}

export interface Expansion {
  /** Every code of the value set (before count/offset). */
  total: number;
  /** The codes asked for (after filter, offset and count). */
  contains: ExpansionContains[];
}

export interface ExpandOptions {
  /** Text matched against display and code. */
  filter?: string;
  offset?: number;
  count?: number;
  /** Leave out inactive codes ($expand `activeOnly`). */
  activeOnly?: boolean;
}

export interface ValidateCodeResult {
  result: boolean;
  message?: string;
  /** The code's display in its code system. */
  display?: string;
}

/** Terminology as profile validation and search ask it (terminology/index.ts). */
export interface Terminology {
  /**
   * Expands a value set (a canonical, or a ValueSet resource given inline). undefined: unknown value set. Throws a
   * FhirError `too-costly` (422) when it has more codes than may be expanded: never a partial answer.
   */
  expand(at: At, valueSet: string | Resource, options?: ExpandOptions): Promise<Expansion | undefined>;
  /**
   * Whether a coding is in a value set (a canonical, or a ValueSet resource given inline); undefined when the value
   * set is unknown or cannot be expanded.
   */
  validateCode(at: At, valueSet: string | Resource, coding: Coding): Promise<ValidateCodeResult | undefined>;
  /** The codes at or below `code` (is-a, including it); undefined when the code system or the code is unknown. */
  below(at: At, system: string, code: string): Promise<string[] | undefined>;
  /** The codes at or above `code` (including it); undefined when the code system or the code is unknown. */
  above(at: At, system: string, code: string): Promise<string[] | undefined>;
}

/** Validation against profiles (profile/index.ts). */
export interface ProfileValidator {
  /**
   * The issues of `resource` against each profile canonical in `profiles` (its meta.profile and any asked for).
   * `explicit` profiles the server cannot resolve give an `error` (`not-found`), the others a `warning`.
   */
  validate(
    at: At,
    resource: Resource,
    profiles: { canonical: string; explicit: boolean }[],
  ): Promise<OperationOutcomeIssue[]>;
}

/** The conformance services, built once (index.ts) and passed in (RepoContext.conformance, OperationEnv). */
export interface Conformance {
  shared: SharedSet;
  resolver: ConformanceResolver;
  terminology: Terminology;
  profiles: ProfileValidator;
}
