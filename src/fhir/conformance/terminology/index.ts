// Terminology over stored and shared code systems and value sets (API.md §9).
// (Skeleton: knows no value set until the engine lands.)
import type { ConformanceResolver, Terminology } from '../model.js';

export function createTerminology(_deps: { resolver: ConformanceResolver }): Terminology {
  return {
    expand: async () => undefined,
    validateCode: async () => undefined,
    below: async () => undefined,
    above: async () => undefined,
  };
}
