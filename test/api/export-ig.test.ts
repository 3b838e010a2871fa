// Bulk Data kick-off and parameters as the IG says (https://hl7.org/fhir/uv/bulkdata/export.html, STU2; API.md §5):
// Accept, _since in the future, patient, unknown parameters (strict / lenient, warnings in errors.ndjson),
// _typeFilter, _elements, includeAssociatedData, Group members (inactive, period), the R4 Patient compartment's own
// parameters, and files split at exportFileResources with their counts; then a resume with split files.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportKind, type ExportParams } from '../../src/jobs/kinds/export.js';
import type { JobRow } from '../../src/jobs/queue.js';
import { localFileStore } from '../../src/storage/files.js';
import { testDatabases } from '../support/db.js';
import { created, startTestApp, type TestApp } from '../support/app.js';
import { jobIdOf, kickOff, waitForJob } from '../support/jobs.js';

type Json = Record<string, unknown>;
interface OutFile {
  name: string;
  type: string;
  url: string;
  count: number;
}

const FILE_NAME = /^[A-Za-z]{1,64}(\.[0-9]{1,6})?\.(ndjson|csv)$/;
const SUBSETTED = { system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'SUBSETTED' };

describe.each(testDatabases())('bulk export kick-off and parameters (IG) on $name', (database) => {
  let t: TestApp;
  let dir: string;
  let p: { projectId: string; adminToken: string; memberToken: string };
  let other: { projectId: string; adminToken: string; memberToken: string };
  const pt: Json[] = [];
  const obs: Record<string, Json> = {};
  let otherPatient: Json;
  let group: Json;

  const post = (token: string, r: Json): Promise<Json> => created(t, token, r);
  const ref = (r: Json): string => `Patient/${r.id as string}`;
  const observation = (code: string, extra: Json): Json => ({
    resourceType: 'Observation',
    status: 'final',
    code: { coding: [{ system: 'http://example.org/codes', code }] },
    valueString: `value ${code}`,
    ...extra,
  });

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-export-ig-'));
    t = await startTestApp(
      database,
      { dataDir: dir, exportFileResources: 2, maxActiveExportsPerUser: 100 },
      { jobs: { exportPageSize: 3 } },
    );
    p = await t.newProject();
    other = await t.newProject();
    for (let i = 0; i < 5; i++)
      pt.push(
        await post(p.adminToken, { resourceType: 'Patient', gender: 'female', name: [{ family: `P${i}` }] }),
      );
    obs.a0 = await post(p.adminToken, observation('a', { subject: { reference: ref(pt[0] as Json) } }));
    obs.b1 = await post(p.adminToken, observation('b', { subject: { reference: ref(pt[1] as Json) } }));
    obs.c2 = await post(p.adminToken, observation('c', { subject: { reference: ref(pt[2] as Json) } }));
    // Observation.focus is not a Patient compartment parameter (subject and performer are).
    obs.focus0 = await post(p.adminToken, observation('a', { focus: [{ reference: ref(pt[0] as Json) }] }));
    obs.performer3 = await post(
      p.adminToken,
      observation('a', { performer: [{ reference: ref(pt[3] as Json) }] }),
    );
    await post(p.adminToken, { resourceType: 'Organization', name: 'Not in the compartment' });
    const member = (i: number, extra: Json = {}): Json => ({
      entity: { reference: ref(pt[i] as Json) },
      ...extra,
    });
    group = await post(p.adminToken, {
      resourceType: 'Group',
      type: 'person',
      actual: true,
      member: [
        member(0),
        member(1, { inactive: true }),
        member(2, { period: { start: '2010-01-01', end: '2020-12-31' } }),
        member(3, { period: { start: '2999-01-01' } }),
        member(4, { period: { start: '2020-01-01T00:00:00Z', end: '2999-01-01' } }),
      ],
    });
    otherPatient = await post(other.adminToken, { resourceType: 'Patient', name: [{ family: 'Other' }] });
  });
  afterAll(async () => {
    await t?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const ids = (rs: Json[] | undefined): string[] => (rs ?? []).map((r) => r.id as string).sort();
  const idsOf = (...rs: Json[]): string[] => ids(rs);

  /** Kick-off with headers of our choosing (GET, or POST with a Parameters body). */
  const start = (url: string, headers: Record<string, string>, parameter?: Json[]) =>
    t.request({
      method: parameter ? 'POST' : 'GET',
      url: `${t.fhir}/${url}`,
      token: p.adminToken,
      headers: { accept: 'application/fhir+json', ...headers },
      ...(parameter ? { payload: { resourceType: 'Parameters', parameter } } : {}),
    });

  const files = (job: { output?: unknown }, name: 'output' | 'error'): OutFile[] =>
    ((job.output as { parameter?: { name: string; part: Json[] }[] } | undefined)?.parameter ?? [])
      .filter((x) => x.name === name)
      .map((x) => {
        const part = (n: string): Json | undefined => x.part.find((y) => y.name === n);
        const url = part('url')?.valueUri as string;
        return {
          name: url.slice(url.lastIndexOf('/') + 1),
          type: part('type')?.valueCode as string,
          url,
          count: part('count')?.valueInteger as number,
        };
      });

  const download = async (f: OutFile): Promise<Json[]> => {
    const res = await t.request({
      method: 'GET',
      url: f.url.replace('http://cinder.test', ''),
      token: p.adminToken,
    });
    expect(res.statusCode, f.url).toBe(200);
    const lines = res.body.split('\n').filter(Boolean);
    expect(lines).toHaveLength(f.count);
    return lines.map((l) => JSON.parse(l) as Json);
  };

  /** Runs a kick-off answer to completion: resources by type (over all its files) and the error file's outcomes. */
  const run = async (res: {
    statusCode: number;
    headers: Record<string, unknown>;
    body: string;
  }): Promise<{ byType: Record<string, Json[]>; errors: Json[]; out: OutFile[] }> => {
    const job = await waitForJob(t, jobIdOf(res), p.adminToken);
    expect(job.status).toBe('completed');
    const out = files(job, 'output');
    const byType: Record<string, Json[]> = {};
    for (const f of out) {
      expect(f.name).toMatch(FILE_NAME);
      (byType[f.type] ??= []).push(...(await download(f)));
    }
    const err = files(job, 'error');
    expect(err.length).toBeLessThanOrEqual(1);
    const errors = err[0] ? await download(err[0]) : [];
    if (err[0]) expect(err[0]).toMatchObject({ name: 'errors.ndjson', type: 'OperationOutcome' });
    return { byType, errors, out };
  };

  const texts = (errors: Json[]): string[] =>
    errors.map((o) => {
      expect(o.resourceType).toBe('OperationOutcome');
      return ((o.issue as { details: { text: string } }[])[0] as { details: { text: string } }).details.text;
    });

  const expect400 = (res: { statusCode: number; body: string }, text: RegExp): void => {
    expect(res.statusCode, res.body).toBe(400);
    const oo = JSON.parse(res.body) as {
      resourceType: string;
      issue: { severity: string; details: { text: string } }[];
    };
    expect(oo.resourceType).toBe('OperationOutcome');
    expect(oo.issue[0]?.severity).toBe('error');
    expect(oo.issue[0]?.details.text).toMatch(text);
  };

  const ASYNC = { prefer: 'respond-async' }; // `start` adds the FHIR Accept unless a test names another

  it('needs an Accept the kick-off can answer (FHIR JSON); a missing one is 400', async () => {
    for (const accept of [
      'application/fhir+xml',
      'text/html',
      'application/fhir+json;q=0',
      'application/json',
    ]) {
      expect400(await start('$export?_type=Patient', { ...ASYNC, accept }), /Unsupported Accept/);
    }
    const none = await t.request({
      method: 'GET',
      url: `${t.fhir}/$export?_type=Patient`,
      token: p.adminToken,
      headers: ASYNC,
    });
    expect400(none, /needs the header Accept: application\/fhir\+json/);
    for (const headers of [
      { ...ASYNC, accept: 'application/fhir+json' },
      { ...ASYNC, accept: '*/*' },
    ]) {
      const { byType } = await run(await start('$export?_type=Patient', headers));
      expect(ids(byType.Patient)).toEqual(ids(pt));
    }
  });

  it('refuses a _since in the future and a patient parameter at system level', async () => {
    const future = new Date(Date.now() + 3_600_000).toISOString();
    expect400(
      await kickOff(t, p.adminToken, `$export?_since=${encodeURIComponent(future)}`),
      /_since is in the future/,
    );
    expect400(
      await kickOff(t, p.adminToken, '$export', {
        parameter: [{ name: 'patient', valueReference: { reference: ref(pt[0] as Json) } }],
      }),
      /patient parameter applies to Patient\/\$export and Group/,
    );
  });

  it('refuses unknown parameters under handling=strict, else ignores them with a warning in errors.ndjson', async () => {
    expect400(
      await start('$export?_type=Patient&_until=2020-01-01', { prefer: 'respond-async, handling=strict' }),
      /Unknown parameter _until/,
    );
    for (const prefer of ['respond-async', 'respond-async; handling=lenient']) {
      const { byType, errors, out } = await run(
        await start('$export?_type=Patient&_until=2020-01-01', { prefer }),
      );
      expect(ids(byType.Patient)).toEqual(ids(pt));
      expect(texts(errors)).toEqual(['Unknown parameter _until was ignored']);
      expect((errors[0]?.issue as Json[])[0]).toMatchObject({ severity: 'warning', code: 'not-supported' });
      expect(out.every((f) => f.name !== 'errors.ndjson')).toBe(true);
    }
    // Without warnings there is no error file.
    const clean = await waitForJob(
      t,
      jobIdOf(await kickOff(t, p.adminToken, '$export?_type=Patient')),
      p.adminToken,
    );
    expect(files(clean, 'error')).toEqual([]);
  });

  it('exports only the compartments of the patient parameters; others are left out with a warning', async () => {
    const patient = (r: string): Json => ({ name: 'patient', valueReference: { reference: r } });
    const { byType } = await run(
      await kickOff(t, p.adminToken, 'Patient/$export', {
        parameter: [
          patient(ref(pt[0] as Json)),
          patient(ref(pt[3] as Json)),
          { name: '_type', valueString: 'Patient,Observation' },
        ],
      }),
    );
    expect(ids(byType.Patient)).toEqual(idsOf(pt[0] as Json, pt[3] as Json));
    expect(ids(byType.Observation)).toEqual(idsOf(obs.a0 as Json, obs.performer3 as Json));
    // An unknown or invisible patient (the same words for both) and, at Group level, a patient who is not a current
    // member are left out with a warning; under handling=strict they are refused.
    const left = await run(
      await kickOff(t, p.adminToken, 'Patient/$export', {
        parameter: [patient('Patient/nope'), patient(ref(otherPatient)), patient(ref(pt[0] as Json))],
      }),
    );
    expect(ids(left.byType.Patient)).toEqual(idsOf(pt[0] as Json));
    expect(texts(left.errors)).toEqual([
      'Patient/nope was not found and was left out',
      `Patient/${otherPatient.id as string} was not found and was left out`,
    ]);
    const nobody = await run(
      await kickOff(t, p.adminToken, 'Patient/$export', { parameter: [patient('Patient/nope')] }),
    );
    expect(nobody.byType).toEqual({});
    expect400(
      await start('Patient/$export', { prefer: 'respond-async, handling=strict' }, [patient('Patient/nope')]),
      /Patient\/nope was not found/,
    );
    const gurl = `Group/${group.id as string}/$export`;
    const outside = await run(
      await kickOff(t, p.adminToken, gurl, { parameter: [patient(ref(pt[1] as Json))] }),
    );
    expect(outside.byType).toEqual({});
    expect(texts(outside.errors)).toEqual([
      `Patient/${(pt[1] as Json).id as string} is not a current member of the Group and was left out`,
    ]);
    const g = await run(await kickOff(t, p.adminToken, gurl, { parameter: [patient(ref(pt[4] as Json))] }));
    expect(ids(g.byType.Patient)).toEqual(idsOf(pt[4] as Json));
    expect(g.byType.Observation).toBeUndefined();
  });

  it('applies _typeFilter queries OR-ed per type through the search parameters; a bad query is 400', async () => {
    const q = (s: string): string => encodeURIComponent(s);
    const a = `Observation?code=${q('http://example.org/codes|a')}`;
    const { byType } = await run(
      await kickOff(
        t,
        p.adminToken,
        `$export?_type=Observation,Patient&_typeFilter=${q(`${a}&subject=${ref(pt[0] as Json)}`)},${q('Observation?code=b')}` +
          `&_typeFilter=${q('Patient?family=P2')}`,
      ),
    );
    expect(ids(byType.Observation)).toEqual(idsOf(obs.a0 as Json, obs.b1 as Json));
    expect(ids(byType.Patient)).toEqual(idsOf(pt[2] as Json));
    // A comma inside one query ORs its values.
    const or = await run(
      await kickOff(t, p.adminToken, `$export?_type=Observation&_typeFilter=${q('Observation?code=b,c')}`),
    );
    expect(ids(or.byType.Observation)).toEqual(idsOf(obs.b1 as Json, obs.c2 as Json));
    // A filter on a type that is not exported is left out, with a warning.
    const unused = await run(
      await kickOff(t, p.adminToken, `$export?_type=Patient&_typeFilter=${q('Observation?code=b')}`),
    );
    expect(Object.keys(unused.byType)).toEqual(['Patient']);
    expect(texts(unused.errors)).toEqual([
      '_typeFilter for Observation was ignored: Observation is not exported',
    ]);
    for (const [bad, text] of [
      ['Observation?nope=1', /Invalid _typeFilter Observation\?nope=1/],
      ['Observation?code=b&_sort=date', /result parameter _sort/],
      ['code=b', /expected Type\?query/],
      ['Nope?code=b', /expected Type\?query/],
    ] as const) {
      expect400(await kickOff(t, p.adminToken, `$export?_type=Observation&_typeFilter=${q(bad)}`), text);
    }
    // Under handling=lenient a filter that cannot be applied is left out with a warning (BDT).
    const lenient = await run(
      await start(
        `$export?_type=Observation&_typeFilter=${q('Observation?nope=1')},${q('Observation?code=b')}`,
        {
          prefer: 'respond-async, handling=lenient',
        },
      ),
    );
    expect(ids(lenient.byType.Observation)).toEqual(idsOf(obs.b1 as Json));
    expect(texts(lenient.errors)[0]).toMatch(
      /Invalid _typeFilter Observation\?nope=1.*; the filter was ignored/,
    );
  });

  it('keeps the _elements listed plus the mandatory ones, tagged SUBSETTED', async () => {
    const { byType } = await run(
      await kickOff(t, p.adminToken, '$export?_type=Patient,Observation&_elements=Patient.name,subject'),
    );
    for (const r of byType.Patient ?? []) {
      expect(Object.keys(r).sort()).toEqual(['id', 'meta', 'name', 'resourceType']);
      expect((r.meta as { tag: Json[] }).tag).toContainEqual(SUBSETTED);
    }
    const a0 = byType.Observation?.find((r) => r.id === obs.a0?.id) as Json;
    // status and code are mandatory (1..1) in R4 Observation; valueString is dropped.
    expect(Object.keys(a0).sort()).toEqual(['code', 'id', 'meta', 'resourceType', 'status', 'subject']);
    expect((a0.meta as { tag: Json[] }).tag).toContainEqual(SUBSETTED);
    expect400(
      await kickOff(t, p.adminToken, '$export?_elements=Patient.nope'),
      /Patient has no element nope/,
    );
    expect400(await kickOff(t, p.adminToken, '$export?_elements=name.given'), /Invalid _elements entry/);
  });

  it('ignores includeAssociatedData with a warning, and refuses it under handling=strict', async () => {
    expect400(
      await start('Patient/$export?includeAssociatedData=LatestProvenanceResources', {
        prefer: 'respond-async, handling=strict',
      }),
      /includeAssociatedData=LatestProvenanceResources is not supported/,
    );
    for (const prefer of ['respond-async', 'respond-async, handling=lenient']) {
      const { errors } = await run(
        await start('Patient/$export?_type=Patient&includeAssociatedData=_custom,LatestProvenanceResources', {
          prefer,
        }),
      );
      expect(texts(errors)).toEqual([
        'includeAssociatedData=_custom is not supported and was ignored',
        'includeAssociatedData=LatestProvenanceResources is not supported and was ignored',
      ]);
    }
  });

  it('exports the Group members that are active now', async () => {
    const { byType } = await run(
      await kickOff(t, p.adminToken, `Group/${group.id as string}/$export?_type=Patient,Observation,Group`),
    );
    expect(ids(byType.Patient)).toEqual(idsOf(pt[0] as Json, pt[4] as Json));
    expect(ids(byType.Observation)).toEqual(idsOf(obs.a0 as Json));
    expect(ids(byType.Group)).toEqual(idsOf(group));
  });

  it('follows the Patient CompartmentDefinition: its types, through its parameters only', async () => {
    const { byType, errors } = await run(
      await kickOff(t, p.adminToken, 'Patient/$export?_type=Patient,Observation,Organization'),
    );
    expect(ids(byType.Patient)).toEqual(ids(pt));
    // subject and performer are compartment parameters of Observation; focus is not.
    expect(ids(byType.Observation)).toEqual(
      idsOf(obs.a0 as Json, obs.b1 as Json, obs.c2 as Json, obs.performer3 as Json),
    );
    expect(byType.Organization).toBeUndefined();
    expect(texts(errors)).toEqual(['Not in the Patient compartment, not exported: Organization']);
    expect400(
      await kickOff(t, p.adminToken, 'Patient/$export?_type=Organization'),
      /Not in the Patient compartment/,
    );
    // Without _type: compartment types only.
    const all = await run(await kickOff(t, p.adminToken, 'Patient/$export'));
    expect(all.byType.Organization).toBeUndefined();
    expect(ids(all.byType.Observation)).not.toContain(obs.focus0?.id);
    expect(ids(all.byType.Group)).toEqual(idsOf(group));
  });

  it('splits a type into files of exportFileResources resources, each with its count', async () => {
    const { out, byType } = await run(await kickOff(t, p.adminToken, '$export?_type=Patient,Observation'));
    expect(out.map((f) => [f.name, f.type, f.count])).toEqual([
      ['Patient.ndjson', 'Patient', 2],
      ['Patient.2.ndjson', 'Patient', 2],
      ['Patient.3.ndjson', 'Patient', 1],
      ['Observation.ndjson', 'Observation', 2],
      ['Observation.2.ndjson', 'Observation', 2],
      ['Observation.3.ndjson', 'Observation', 1],
    ]);
    expect(ids(byType.Patient)).toEqual(ids(pt));
    expect(byType.Observation).toHaveLength(5);
  });

  it('reports a CSV FHIRPath that fails on some resources in errors.ndjson, and applies _typeFilter', async () => {
    const two = await post(p.adminToken, {
      resourceType: 'Patient',
      gender: 'male',
      name: [{ family: 'Twogiven', given: ['Ann', 'Bea'] }],
    });
    const res = await kickOff(
      t,
      p.adminToken,
      `$export?_type=Patient&_outputFormat=text/csv&_fields=${encodeURIComponent('id,name.given.substring(0, 1)')}` +
        `&_typeFilter=${encodeURIComponent('Patient?gender=male')}`,
    );
    const job = await waitForJob(t, jobIdOf(res), p.adminToken);
    expect(job.status).toBe('completed');
    const [csvFile] = files(job, 'output');
    const csv = await t.request({
      method: 'GET',
      url: (csvFile as OutFile).url.replace('http://cinder.test', ''),
      token: p.adminToken,
    });
    // Only the male Patient: its cell is empty, since substring() over two given names fails.
    expect(
      csv.body
        .replace(/^\uFEFF/, '')
        .trim()
        .split('\r\n'),
    ).toEqual(['id,"name.given.substring(0, 1)"', `${two.id as string},`]);
    const [err] = files(job, 'error');
    expect(texts(await download(err as OutFile))).toEqual([
      expect.stringMatching(
        new RegExp(
          `^A FHIRPath failed on 1 resource\\(s\\).*First: name\\.given\\.substring\\(0, 1\\) on Patient/${two.id as string}`,
        ),
      ),
    ]);
    // The other tests count five Patients.
    const del = await t.request({
      method: 'DELETE',
      url: `${t.fhir}/Patient/${two.id as string}`,
      token: p.adminToken,
    });
    expect(del.statusCode).toBeLessThan(300);
  });

  it('resumes with split files: a step written after the checkpoint is cut off, whichever files it began', async () => {
    const store = localFileStore(path.join(dir, 'resume'));
    const env = {
      db: t.db,
      files: store,
      fhirBase: 'http://cinder.test/fhir/R4',
      clock: () => new Date(),
      newId: randomUUID,
    };
    const params: ExportParams = {
      level: 'system',
      types: ['Patient', 'Observation'],
      since: null,
      projectId: p.projectId,
      warnings: ['a warning'],
    };
    const kind = exportKind({ pageSize: 2, pagesPerStep: 2, fileResources: 2 });
    const read = async (key: string): Promise<string> => {
      let text = '';
      for await (const chunk of (await store.read(key)) as AsyncIterable<Buffer>)
        text += chunk.toString('utf8');
      return text;
    };
    const exportAll = async (jobId: string, crashAfter?: number): Promise<Record<string, string>> => {
      const job = { id: jobId, params } as unknown as JobRow;
      let state = await kind.start(env, job);
      for (let step = 1; ; step++) {
        const r = await kind.runStep(env, job, state);
        if (step === crashAfter && !r.done) {
          // A worker ran the next step and died before its checkpoint; another one resumes from this one.
          await kind.runStep(env, job, r.state);
          await kind.resume(env, job, r.state);
        }
        state = r.state;
        if (r.done) {
          const out: Record<string, string> = {};
          for (const f of [...files(r, 'output'), ...files(r, 'error')])
            out[`${f.name} ${f.count}`] = await read(`exports/${jobId}/${f.name}`);
          return out;
        }
      }
    };
    const clean = await exportAll('clean');
    expect(Object.keys(clean).sort()).toEqual([
      'Observation.2.ndjson 2',
      'Observation.3.ndjson 1',
      'Observation.ndjson 2',
      'Patient.2.ndjson 2',
      'Patient.3.ndjson 1',
      'Patient.ndjson 2',
      'errors.ndjson 1',
    ]);
    for (const step of [1, 2]) expect(await exportAll(`crashed-${step}`, step)).toEqual(clean);
  });
});
