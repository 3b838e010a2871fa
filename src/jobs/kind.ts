// What a job kind implements (ARCHITECTURE habit 9): `start` (first checkpoint), `runStep` (one short, checkpointed
// chunk), `resume` (after another worker died mid-job) and `cancel` (delete partial work). The runner does the rest.
import type { Db } from '../storage/db.js';
import type { FileStore } from '../storage/files.js';
import type { Resource } from '../fhir/types.js';
import type { JobRow } from './queue.js';
import type { SearchParamRegistry } from '../fhir/search/custom-registry.js';
import type { ReadRouter } from '../storage/replicas.js';

export interface JobEnv {
  db: Db;
  files: FileStore;
  /** Absolute FHIR base without trailing slash (for output URLs). */
  fhirBase: string;
  clock: () => Date;
  newId: () => string;
  /** Custom search parameters (API.md §9), which a reindex writes beside the built-in ones; absent: none. */
  searchParams?: SearchParamRegistry;
  /** Told what an export step wrote: resources (`export`) or rows (`view-export`), for metrics; absent: not told. */
  wrote?(kind: 'export' | 'view-export', count: number): void;
  /** Read replicas (storage/replicas.ts): an export reads its pages from one that has replayed its start. */
  reads?: ReadRouter;
}

export interface StepResult<S> {
  state: S;
  done: boolean;
  /** Human-readable progress, served as `X-Progress`. */
  progress: string;
  /** A Parameters resource published as `AsyncJob.output` when the job completes. */
  output?: Resource;
}

export interface JobKind<S = unknown> {
  start(env: JobEnv, job: JobRow): Promise<S>;
  resume(env: JobEnv, job: JobRow, state: S): Promise<void>;
  runStep(env: JobEnv, job: JobRow, state: S): Promise<StepResult<S>>;
  cancel(env: JobEnv, job: JobRow): Promise<void>;
}
