// Faults of the FHIRPath worker pool fail only their own task (issue 25 point 1): a task the structured clone refuses
// (postMessage throwing DataCloneError, or RangeError for data nested past its stack), a worker that errors or dies
// mid-task, and nothing reaches the process as an uncaught exception or an unhandled rejection.
import { Worker } from 'node:worker_threads';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FhirError } from '../outcome.js';
import { createFhirpathPool, type FhirpathPool } from './fhirpath-pool.js';

const view = (name = 'id') => ({
  resourceType: 'ViewDefinition',
  resource: 'Patient',
  select: [{ column: [{ name, path: 'getResourceKey()' }] }],
});
const jsons = [JSON.stringify({ resourceType: 'Patient', id: 'p1' })];

/** An object nested `levels` deep, built without recursion. */
function deep(levels: number): Record<string, unknown> {
  let v: Record<string, unknown> = {};
  for (let i = 0; i < levels; i++) v = { a: [v] };
  return v;
}

const failure = async (p: Promise<unknown>): Promise<Error> => {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('no error');
};

describe('FHIRPath pool faults', () => {
  let pool: FhirpathPool;
  const processErrors: unknown[] = [];
  const onError = (err: unknown) => processErrors.push(err);
  beforeEach(() => {
    pool = createFhirpathPool({ timeoutMs: 30_000, size: 2 });
    process.on('uncaughtException', onError);
    process.on('unhandledRejection', onError);
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await pool.close();
    process.off('uncaughtException', onError);
    process.off('unhandledRejection', onError);
    expect(processErrors).toEqual([]);
  });

  it('a task postMessage cannot clone fails alone with 422, again and again, and the pool goes on', async () => {
    for (let i = 0; i < 3; i++) {
      // Deeper than the structured clone's stack (RangeError), and a value it cannot copy (DataCloneError).
      const [tooDeep, notData, ok] = await Promise.allSettled([
        pool.viewRows({ ...view(), constant: [deep(50_000)] }, jsons),
        pool.checkView({ ...view(), f: () => 1 }),
        pool.viewRows(view(), jsons),
      ]);
      for (const r of [tooDeep, notData]) {
        expect(r.status).toBe('rejected');
        const err = (r as PromiseRejectedResult).reason as FhirError;
        expect(err).toBeInstanceOf(FhirError);
        expect(err.status).toBe(422);
        expect(err.code).toBe('views.unsendable');
        expect(err.message).toMatch(/ViewDefinition cannot be passed to the FHIRPath worker/);
      }
      expect(ok).toEqual({ status: 'fulfilled', value: [{ id: 'p1' }] });
    }
    expect(await pool.viewRows(view(), jsons)).toEqual([{ id: 'p1' }]);
  });

  it('a worker that dies or errors mid-task fails only its task; the others finish and a new worker takes over', async () => {
    const post = Worker.prototype.postMessage;
    // The task whose view has a column named `crash` kills its worker as it is sent; `error` makes it emit an error.
    vi.spyOn(Worker.prototype, 'postMessage').mockImplementation(function (this: Worker, message: unknown) {
      const text = JSON.stringify(message);
      if (text.includes('"name":"crash"')) return void this.terminate();
      post.call(this, message);
      if (text.includes('"name":"error"')) this.emit('error', new Error('worker fault'));
    });
    for (let i = 0; i < 2; i++) {
      const [crashed, errored, ok, ok2] = await Promise.allSettled([
        pool.viewRows(view('crash'), jsons),
        pool.viewRows(view('error'), jsons),
        pool.viewRows(view(), jsons),
        pool.checkView(view()),
      ]);
      expect((crashed as PromiseRejectedResult).reason).toEqual(new Error('The FHIRPath worker stopped'));
      expect((errored as PromiseRejectedResult).reason).toEqual(new Error('worker fault'));
      expect(ok).toEqual({ status: 'fulfilled', value: [{ id: 'p1' }] });
      expect(ok2).toEqual({ status: 'fulfilled', value: [{ name: 'id', collection: false }] });
    }
    vi.restoreAllMocks();
    expect(await pool.viewRows(view(), jsons)).toEqual([{ id: 'p1' }]);
  });

  it('a reply that cannot be received fails its task and the worker is replaced', async () => {
    const post = Worker.prototype.postMessage;
    vi.spyOn(Worker.prototype, 'postMessage').mockImplementation(function (this: Worker, message: unknown) {
      post.call(this, message);
      if (JSON.stringify(message).includes('"name":"lost"'))
        this.emit('messageerror', new Error('cannot deserialize'));
    });
    const err = await failure(pool.viewRows(view('lost'), jsons));
    expect(err).toBeInstanceOf(FhirError);
    expect((err as FhirError).code).toBe('views.unsendable');
    expect(await pool.viewRows(view(), jsons)).toEqual([{ id: 'p1' }]);
  });
});
