// Bounds how many `$csv` requests of this process run at once (issue 12 point 11: 16 parallel 1000-row `$csv`
// requests pushed other tenants' reads to 11 s); the others wait their turn, and beyond a queue length answer 429.
import { FhirError } from '../outcome.js';

export interface Limiter {
  /** Runs `fn` when one of the slots is free; throws a 429 FhirError when too many are waiting already. */
  run<T>(fn: () => Promise<T>): Promise<T>;
}

export function createLimiter(slots: number, maxWaiting: number): Limiter {
  let running = 0;
  const waiting: (() => void)[] = [];
  const release = (): void => {
    const next = waiting.shift();
    if (next) next();
    else running--;
  };
  return {
    async run(fn) {
      if (running >= slots) {
        if (waiting.length >= maxWaiting) {
          throw new FhirError('throttled', 'Too many $csv requests at once; retry later', 'csv.busy', {
            headers: { 'retry-after': '1' },
          });
        }
        await new Promise<void>((resolve) => waiting.push(resolve)); // its slot is handed over by release()
      } else running++;
      try {
        return await fn();
      } finally {
        release();
      }
    },
  };
}
