// A view's rows over many resources, computed in the FHIRPath worker pool in batches sized so that each batch's rows
// stay small (issue 25 point 7): the rows of one task are copied to the event loop in one piece and held there until
// written, so a view that gives hundreds of rows a resource must not be sent 500 resources at once. The size adapts
// to the rows the last batch gave; a batch that still gives more than the worker accepts (worker-tasks.ts
// MAX_BATCH_CELLS) is run again in halves.
import type { FhirpathPool } from '../csv/fhirpath-pool.js';
import { FhirError } from '../outcome.js';
import type { Row } from './compile.js';
import { BATCH_TOO_LARGE } from './worker-tasks.js';

/** Rows a batch aims at: a few milliseconds to copy and to write. */
const TARGET_ROWS = 5_000;

export interface BatchSizer {
  /** Resources the next batch holds (from 1 up to the caller's maximum). */
  size: number;
  max: number;
}

export const batchSizer = (max: number): BatchSizer => ({ size: Math.min(max, 50), max });

/** Adapts the size to the rows `n` resources gave. */
function adapt(sizer: BatchSizer, n: number, rows: number): void {
  const perResource = Math.max(rows, 1) / n;
  sizer.size = Math.max(1, Math.min(sizer.max, Math.floor(TARGET_ROWS / perResource)));
}

const tooLarge = (err: unknown): boolean => err instanceof FhirError && err.code === BATCH_TOO_LARGE;

/**
 * The rows of `jsons` (resource texts), in order, one array per batch: the caller writes each before the next is
 * computed, so at most one batch of rows is held at a time.
 */
export async function* viewRowBatches(
  pool: FhirpathPool,
  view: unknown,
  jsons: readonly string[],
  sizer: BatchSizer,
): AsyncGenerator<Row[]> {
  let at = 0;
  while (at < jsons.length) {
    const n = Math.min(sizer.size, jsons.length - at);
    let rows: Row[];
    try {
      rows = await pool.viewRows(view, jsons.slice(at, at + n));
    } catch (err) {
      if (!tooLarge(err) || n === 1) throw err;
      sizer.size = Math.max(1, Math.floor(n / 2));
      continue;
    }
    adapt(sizer, n, rows.length);
    at += n;
    yield rows;
  }
}
