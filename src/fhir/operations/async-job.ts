// Reading an AsyncJob's status (https://hl7.org/fhir/uv/bulkdata/export.html#bulk-data-status-request, API.md §5):
// the AsyncJob resource (202 with X-Progress while `accepted`, 200 once final) for FHIR clients, or the Bulk Data
// IG's status semantics (202 while running, the complete-status manifest, an error OperationOutcome, 404 once
// cancelled) for a request that asks for `application/json`. 404 to whoever may not access the job.
import type { Queryable } from '../../storage/db.js';
import { jobProgress } from '../../jobs/queue.js';
import type { AsyncJobResource } from '../../jobs/async-job.js';
import { canAccessJob } from '../access.js';
import { FhirError, outcome } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import { selectCurrent, type StoredRow } from '../repository/store.js';
import { RawJson, RawText, type FhirResult } from '../result.js';

/** Seconds an IG client is asked to wait between status requests while a job runs. */
export const STATUS_RETRY_AFTER_SECONDS = 2;

/** The AsyncJob row when it exists, is not deleted and the caller may access it; otherwise a 404. */
export async function accessibleJob(
  db: Queryable,
  ctx: RepoContext,
  id: string,
  forUpdate = false,
): Promise<{ row: StoredRow; job: AsyncJobResource }> {
  const row = await selectCurrent(db, 'AsyncJob', id, forUpdate);
  const job = row && !row.deleted ? (JSON.parse(row.json) as AsyncJobResource) : undefined;
  if (
    !row ||
    !job ||
    !canAccessJob(ctx.actor, ctx.author, { projectId: row.project_id, author: job.meta?.author?.reference })
  ) {
    throw new FhirError('not-found', 'Not found', 'job.not-found');
  }
  return { row, job };
}

/**
 * Whether a status request wants the Bulk Data IG's answer: its `Accept` names `application/json` and not
 * `application/fhir+json` (API.md §5). Anything else (FHIR clients, `*\/*`, no header) gets the AsyncJob resource.
 */
export function wantsBulkStatus(accept: string | undefined): boolean {
  const types = (accept ?? '')
    .toLowerCase()
    .split(',')
    .map((t) => t.split(';')[0]?.trim());
  return types.includes('application/json') && !types.includes('application/fhir+json');
}

type Part = {
  name?: string;
  valueCode?: string;
  valueUri?: string;
  valueInteger?: number;
  valueString?: string;
};
type OutputParameters = { parameter?: { name?: string; part?: Part[]; resource?: unknown }[] };

export interface ManifestFile {
  type: string;
  url: string;
  count?: number;
  /** A views export's file: the view's name (its rows are not resources). */
  name?: string;
}

/** The files of a completed job's `output` parameters named `name` (`output` or `error`). */
export function outputFiles(job: AsyncJobResource, name: 'output' | 'error'): ManifestFile[] {
  const files: ManifestFile[] = [];
  for (const p of (job.output as OutputParameters | undefined)?.parameter ?? []) {
    if (p.name !== name) continue;
    const part = (n: string): Part | undefined => (p.part ?? []).find((x) => x.name === n);
    const type = part('type')?.valueCode;
    const url = part('url')?.valueUri;
    const count = part('count')?.valueInteger;
    const view = part('name')?.valueString;
    if (typeof type === 'string' && typeof url === 'string')
      files.push({
        type,
        url,
        ...(typeof count === 'number' ? { count } : {}),
        ...(typeof view === 'string' ? { name: view } : {}),
      });
  }
  return files;
}

/** The IG's complete-status manifest of a completed job. */
function manifest(job: AsyncJobResource): Record<string, unknown> {
  return {
    transactionTime: job.transactionTime,
    request: job.request,
    requiresAccessToken: true,
    output: outputFiles(job, 'output'),
    error: outputFiles(job, 'error'),
  };
}

/** The OperationOutcome a failed job recorded (its `output` parameter `outcome`), or a generic one. */
function failure(job: AsyncJobResource): FhirResult {
  const recorded = ((job.output as OutputParameters | undefined)?.parameter ?? []).find(
    (p) => p.name === 'outcome',
  )?.resource;
  return {
    status: 500,
    body:
      recorded && typeof recorded === 'object'
        ? (recorded as FhirResult['body'])
        : outcome('error', 'exception', 'The job failed'),
  };
}

async function running(db: Queryable, id: string): Promise<Record<string, string>> {
  return {
    'x-progress': (await jobProgress(db, id)) ?? 'accepted',
    'retry-after': String(STATUS_RETRY_AFTER_SECONDS),
  };
}

export async function readJobStatus(
  db: Queryable,
  ctx: RepoContext,
  id: string,
  accept?: string,
): Promise<FhirResult> {
  const { row, job } = await accessibleJob(db, ctx, id);
  if (wantsBulkStatus(accept)) {
    if (job.status === 'accepted') return { status: 202, body: null, headers: await running(db, id) };
    if (job.status === 'completed')
      return {
        status: 200,
        body: new RawText(JSON.stringify(manifest(job)), 'application/json; charset=utf-8'),
      };
    if (job.status === 'failed') return failure(job);
    throw new FhirError('not-found', 'Not found: the job was cancelled', 'job.cancelled');
  }
  const common = { versionId: String(row.version_id), lastModified: row.last_updated };
  if (job.status !== 'accepted') return { status: 200, body: new RawJson(row.json), ...common };
  return { status: 202, body: new RawJson(row.json), headers: await running(db, id), ...common };
}
