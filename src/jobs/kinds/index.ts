// The job kinds this server runs, by the `kind` stored in the queue.
import type { JobKind } from '../kind.js';
import { expungeKind } from './expunge.js';
import { exportKind, type ExportKindOptions } from './export.js';
import { reindexKind } from './reindex.js';
import { viewExportKind, type ViewExportKindOptions } from './view-export.js';

/** A views export pages, steps and runs FHIRPath as the bulk export is configured to. */
function viewOptions(e: ExportKindOptions | undefined, maxCells: number | undefined): ViewExportKindOptions {
  return {
    ...(maxCells !== undefined ? { maxCells } : {}),
    ...(e?.pageSize !== undefined ? { pageSize: e.pageSize } : {}),
    ...(e?.pagesPerStep !== undefined ? { pagesPerStep: e.pagesPerStep } : {}),
    ...(e?.fhirpath ? { fhirpath: e.fhirpath } : {}),
  };
}

export function defaultKinds(
  opts: { export?: ExportKindOptions; viewExportMaxCells?: number } = {},
): Record<string, JobKind<never>> {
  return {
    export: exportKind(opts.export) as JobKind<never>,
    reindex: reindexKind() as JobKind<never>,
    expunge: expungeKind() as JobKind<never>,
    'view-export': viewExportKind(viewOptions(opts.export, opts.viewExportMaxCells)) as JobKind<never>,
  };
}
