// Bounds how much of one kind of work a process runs at once; the rest waits its turn, and beyond a queue length is
// refused (429 with Retry-After, from `busy`). Used for `$csv` requests (issue 12 point 11: 16 parallel 1000-row
// `$csv` requests pushed other tenants' reads to 11 s) and for large request bodies (http/plugins/large-bodies.ts).
import type { FhirError } from './fhir/outcome.js';

export interface Limiter {
  /** Runs `fn` when one of the slots is free; throws `busy()` when too many are waiting already. */
  run<T>(fn: () => Promise<T>): Promise<T>;
  /** Takes a slot (waiting for one); the function returned gives it back, once however often it is called. */
  acquire(): Promise<() => void>;
  /** Slots taken and requests waiting, now. */
  state(): { running: number; waiting: number };
}

export function createLimiter(slots: number, maxWaiting: number, busy: () => FhirError): Limiter {
  let running = 0;
  const waiting: (() => void)[] = [];
  const release = (): void => {
    const next = waiting.shift();
    if (next) next();
    else running--;
  };
  const acquire = async (): Promise<() => void> => {
    if (running >= slots) {
      if (waiting.length >= maxWaiting) throw busy();
      await new Promise<void>((resolve) => waiting.push(resolve)); // its slot is handed over by release()
    } else running++;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      release();
    };
  };
  return {
    acquire,
    state: () => ({ running, waiting: waiting.length }),
    async run(fn) {
      const done = await acquire();
      try {
        return await fn();
      } finally {
        done();
      }
    },
  };
}
