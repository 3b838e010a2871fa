// What `$csv` and CSV exports share per process (issue 12 point 11): the FHIRPath worker pool with its deadline,
// and the slots that bound concurrent `$csv` requests. Created by buildApp (or main) and passed in.
import { createFhirpathPool, type FhirpathPool } from './fhirpath-pool.js';
import { createLimiter, type Limiter } from '../../limiter.js';
import { FhirError } from '../outcome.js';

/** `$csv` requests of one process running at once, and waiting beyond those (then 429). */
export const CSV_SLOTS = 2;
export const CSV_MAX_WAITING = 64;

export interface CsvRuntime {
  fhirpath: FhirpathPool;
  slots: Limiter;
}

export function createCsvRuntime(opts: { fhirpathTimeout: number }): CsvRuntime {
  return {
    fhirpath: createFhirpathPool({ timeoutMs: opts.fhirpathTimeout }),
    slots: createLimiter(
      CSV_SLOTS,
      CSV_MAX_WAITING,
      () =>
        new FhirError('throttled', 'Too many $csv requests at once; retry later', 'csv.busy', {
          headers: { 'retry-after': '1' },
        }),
    ),
  };
}
