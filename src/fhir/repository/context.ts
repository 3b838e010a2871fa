// What every repository call needs to know about its caller and its environment (passed in, never global).
import type { FileStore } from '../../storage/files.js';
import type { Actor } from '../access.js';
import type { AccessScope } from '../types.js';
import type { SubscriptionHooks } from '../subscriptions/subscription-writes.js';
import type { Conformance } from '../conformance/model.js';
import type { SearchParamRegistry } from '../search/custom-registry.js';
import type { AuditRecorder } from '../../audit/recorder.js';

export interface RepoContext {
  actor: Actor;
  /** What the caller may read: one project or (super administrators) all. */
  scope: AccessScope;
  /** Reference to the author (profile or ClientApplication), recorded in meta.author. */
  author?: string;
  clock: () => Date;
  newId: () => string;
  /** Absolute FHIR base without trailing slash, e.g. `http://localhost:8103/fhir/R4` (for fullUrl and links). */
  fhirBase: string;
  /**
   * Config `allowedOutboundHosts`: hosts a ClientApplication's URLs may name although they resolve to loopback or
   * private addresses (API.md §2, checked at save by write-rules.ts). Absent: none.
   */
  allowedOutboundHosts?: readonly string[];
  /**
   * Where Binary contents live (binary-content.ts). Absent (bootstrap, jobs): a Binary keeps its base64 `data` in its
   * row, and reads serve it from there.
   */
  binaries?: FileStore;
  /**
   * The subscription engine (API.md §8): the events a write's changes cause, stored with the write, and what storing a
   * Subscription records. Absent (bootstrap, jobs, tests of the repository alone): writes notify nothing.
   */
  subscriptions?: SubscriptionHooks;
  /**
   * Profiles, terminology and canonical resolution (API.md §9): writes that declare `meta.profile` are validated
   * against it. Absent (bootstrap, jobs, tests of the repository alone): only the base definitions are checked.
   */
  conformance?: Conformance;
  /**
   * Custom search parameters (API.md §9 "Search": a project's SearchParameters and the shared ones): indexed on
   * writes, searchable. Absent (bootstrap, jobs' own writes, tests of the repository alone): built-in ones only.
   */
  searchParams?: SearchParamRegistry;
  /**
   * The request's audit recorder (API.md §10): told of every version written, whose AuditEvent (and X-Provenance) is
   * stored in the same transaction (audit-writes.ts). Absent (bootstrap, jobs, auditing off): nothing is recorded.
   */
  audit?: AuditRecorder;
  /**
   * Applies a FHIRPath Patch (JSON texts of the resource and the Parameters) in the FHIRPath worker, with its deadline
   * (patch.ts). Absent (bootstrap, jobs, tests of the repository alone): applied in-process.
   */
  fhirpathPatch?: (resource: string, parameters: string) => Promise<string>;
  /** Config `searchCountLimit`: searches count totals up to this many matches (execute.ts). Absent: no limit. */
  searchCountLimit?: number;
}

export function visible(ctx: Pick<RepoContext, 'scope'>, projectId: string): boolean {
  return ctx.scope.projectId === null || ctx.scope.projectId === projectId;
}

/** A context that sees and writes everything: start-up bootstrap and jobs acting as the system. */
export function systemContext(
  projectId: string,
  env: Pick<RepoContext, 'clock' | 'newId' | 'fhirBase'>,
): RepoContext {
  return { actor: { projectId, projectAdmin: true, superAdmin: true }, scope: { projectId: null }, ...env };
}
