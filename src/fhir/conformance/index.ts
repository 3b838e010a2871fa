// The conformance services (API.md §9), built once per process from the database and the shared set, and passed in.
import type { Queryable } from '../../storage/db.js';
import type { Conformance, SharedSet } from './model.js';
import { createProfileValidator } from './profile/index.js';
import { createResolver } from './resolver.js';
import { createTerminology } from './terminology/index.js';

export function createConformance(db: Queryable, shared: SharedSet): Conformance {
  const resolver = createResolver(db, shared);
  const terminology = createTerminology({ resolver });
  const profiles = createProfileValidator({ resolver, terminology });
  return { shared, resolver, terminology, profiles };
}
