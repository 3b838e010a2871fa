// Helpers for AsyncJob tests: kick off, wait for a final status, download output files.
import { expect } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import type { TestApp } from './app.js';

export const ASYNC = { prefer: 'respond-async', accept: 'application/fhir+json' };

/** The job id of a 202 kick-off answer (asserting its Content-Location and OperationOutcome). */
export function jobIdOf(res: { statusCode: number; headers: Record<string, unknown>; body: string }): string {
  expect(res.statusCode, res.body).toBe(202);
  const loc = String(res.headers['content-location']);
  const m = /^http:\/\/cinder\.test\/fhir\/R4\/AsyncJob\/([A-Za-z0-9\-.]+)$/.exec(loc);
  expect(m, loc).not.toBeNull();
  const oo = JSON.parse(res.body) as { resourceType: string; issue: { severity: string; code: string }[] };
  expect(oo.resourceType).toBe('OperationOutcome');
  expect(oo.issue[0]).toMatchObject({ severity: 'information', code: 'informational' });
  return (m as RegExpExecArray)[1] as string;
}

export interface AsyncJobBody {
  status: string;
  output?: { parameter: { name: string; part: { name: string; valueCode?: string; valueUri?: string }[] }[] };
}

export async function waitForJob(
  t: TestApp,
  id: string,
  token: string,
  timeoutMs = 20_000,
): Promise<AsyncJobBody> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const res = await t.request({ method: 'GET', url: `${t.fhir}/AsyncJob/${id}`, token });
    const job = res.json() as AsyncJobBody;
    if (res.statusCode === 200) {
      expect(job.status).not.toBe('accepted');
      return job;
    }
    expect(res.statusCode, res.body).toBe(202);
    expect(res.headers['x-progress']).toBeTruthy();
    if (Date.now() > until) throw new Error(`job ${id} still accepted`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Output files of a completed export job, by type: the parsed NDJSON lines. */
export async function downloadOutput(
  t: TestApp,
  job: AsyncJobBody,
  token: string,
): Promise<Record<string, Record<string, unknown>[]>> {
  const out: Record<string, Record<string, unknown>[]> = {};
  for (const p of job.output?.parameter ?? []) {
    expect(p.name).toBe('output');
    const type = p.part.find((x) => x.name === 'type')?.valueCode as string;
    const url = p.part.find((x) => x.name === 'url')?.valueUri as string;
    expect(url.startsWith('http://cinder.test/fhir/R4/')).toBe(true);
    const res = await t.request({ method: 'GET', url: url.replace('http://cinder.test', ''), token });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/fhir\+ndjson/);
    expect(res.body.endsWith('\n')).toBe(true);
    out[type] = res.body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  }
  return out;
}

/** Starts an export (`query` after `$export?`, e.g. `_type=Patient`) and returns the AsyncJob id. */
/**
 * An asynchronous request (`Prefer: respond-async`) to `{fhir}/<url>`: a GET, or a POST when `post` is set or a
 * Parameters body (its `parameter` list) is given.
 */
export function kickOff(
  t: TestApp,
  token: string,
  url: string,
  opts: { post?: boolean; parameter?: Record<string, unknown>[] } = {},
): Promise<LightMyRequestResponse> {
  return t.request({
    method: opts.post || opts.parameter ? 'POST' : 'GET',
    url: `${t.fhir}/${url}`,
    token,
    headers: ASYNC,
    ...(opts.parameter ? { payload: { resourceType: 'Parameters', parameter: opts.parameter } } : {}),
  });
}

export async function startExport(t: TestApp, token: string, query = '', path = '$export'): Promise<string> {
  return jobIdOf(await kickOff(t, token, `${path}${query ? `?${query}` : ''}`));
}
