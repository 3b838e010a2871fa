// The job kinds this server runs, by the `kind` stored in the queue.
import type { JobKind } from '../kind.js';
import { expungeKind } from './expunge.js';
import { exportKind, type ExportKindOptions } from './export.js';
import { reindexKind } from './reindex.js';

export function defaultKinds(opts: { export?: ExportKindOptions } = {}): Record<string, JobKind<never>> {
  return {
    export: exportKind(opts.export) as JobKind<never>,
    reindex: reindexKind() as JobKind<never>,
    expunge: expungeKind() as JobKind<never>,
  };
}
