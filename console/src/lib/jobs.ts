// Readers of AsyncJob resources (API.md §5) for the Jobs page: the output files of a job and the operation it runs.
import type { Resource } from './fhir.js';

export interface AsyncJob extends Resource {
  status?: string;
  requestTime?: string;
  transactionTime?: string;
  request?: string;
  output?: {
    parameter?: { name: string; part?: { name: string; valueCode?: string; valueUri?: string }[] }[];
  };
}

/** The files of a completed job's output: `{type, url}` per `output` (and `error`) parameter. */
export function outputFiles(job: AsyncJob): { name: string; url: string }[] {
  const files: { name: string; url: string }[] = [];
  for (const p of job.output?.parameter ?? []) {
    const url = p.part?.find((x) => x.name === 'url')?.valueUri;
    if (url) files.push({ name: decodeURIComponent(url.split('/').pop() ?? p.name), url });
  }
  return files;
}

/** The operation a job runs, from its request URL: `$export`, `$reindex`, … */
export function operationOf(request: string | undefined): string {
  return /\$[A-Za-z-]+/.exec(request ?? '')?.[0] ?? '—';
}
