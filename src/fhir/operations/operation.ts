// What an operation declares about itself (ARCHITECTURE habit 4, https://hl7.org/fhir/R4/operations.html): its code,
// where it is invoked, whether it changes state, and the function that runs it. Routes and the CapabilityStatement
// are derived from these definitions (src/fhir/operations/index.ts), never written out by hand.
import type { Db } from '../../storage/db.js';
import type { Signals } from '../../storage/signals.js';
import type { Conformance } from '../conformance/model.js';
import type { CsvRuntime } from '../csv/runtime.js';
import type { RepoContext } from '../repository/context.js';
import type { FhirResult } from '../result.js';
import type { AsyncRequest } from './async-start.js';
import type { WsBindingEnv } from './get-ws-binding-token.js';

/** What operations may use, passed in by the HTTP layer. */
export interface OperationEnv {
  db: Db;
  signals: Signals;
  /** API.md §1: queued or running exports one login may have. */
  maxActiveExportsPerUser: number;
  /** The FHIRPath worker pool and the `$csv` slots of this process. */
  csv: CsvRuntime;
  /** `$get-ws-binding-token`: the binding-token signer and the websocket URL. */
  wsBinding: WsBindingEnv;
  /** Profiles, terminology and canonical resolution (API.md §9). */
  conformance: Conformance;
}

/** One invocation: the caller, the target named in the URL, and the parameters. */
export interface OperationInput {
  ctx: RepoContext;
  /** The resource type of a type- or instance-level call. */
  type: string;
  /** The resource id of an instance-level call. */
  id: string;
  request: AsyncRequest;
  /** Reports a problem worth an operator's attention (the request's logger). */
  warn(obj: Record<string, unknown>, msg: string): void;
}

export interface OperationDefinition {
  code: string;
  /** system: `{fhir}/$code`; type: `{fhir}/<Type>/$code`; instance: `{fhir}/<Type>/<id>/$code`. */
  level: 'system' | 'type' | 'instance';
  /** Types a type- or instance-level operation applies to; `any`: routed for every type name, `supports` tells which work. */
  types?: readonly string[] | 'any';
  supports?: (type: string) => boolean;
  /** true: POST only. false: GET and POST, unless `methods` narrows it. */
  affectsState: boolean;
  methods?: readonly ('GET' | 'POST')[];
  /**
   * The operation only reads resources (whatever the method): its `env.db` may be a read replica
   * (storage/replicas.ts), and a POST of it is not its login's write.
   */
  replicaReads?: boolean;
  /** Accept any request body, whatever its Content-Type (an empty `$cancel` POST). */
  anyBody?: boolean;
  /** Canonical URL of a published OperationDefinition; Cinder's own are `{fhir}/OperationDefinition/<code>`. */
  definition?: string;
  /**
   * The CapabilityStatement's name for it when that is not the code: the Bulk Data IG names Patient and Group export
   * `patient-export` and `group-export` (its CapabilityStatement, and BDT, look for those names).
   */
  capabilityName?: string;
  run(env: OperationEnv, input: OperationInput): Promise<FhirResult>;
}

/** HTTP methods an operation answers. */
export function operationMethods(op: OperationDefinition): readonly ('GET' | 'POST')[] {
  return op.methods ?? (op.affectsState ? ['POST'] : ['GET', 'POST']);
}
