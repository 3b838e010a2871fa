// $csv through HTTP (API.md §6, seed §4.4, §7, §8): the file's headers and BOM, every cell rule, injection escaping,
// RFC 4180 quoting (checked by a round trip through csv-parse), search filters and _sort, the 1000-row limit with
// X-Total-Count, project isolation and every error; then the CSV bulk export (`$export?_outputFormat=text/csv`):
// the same CSV for any number of rows, its kick-off errors, $cancel, and a resumed job's file.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportKind, type ExportParams } from '../../src/jobs/kinds/export.js';
import type { JobRow } from '../../src/jobs/queue.js';
import { localFileStore } from '../../src/storage/files.js';
import { testDatabases } from '../support/db.js';
import { createEntry, postBundle, startTestApp, type TestApp } from '../support/app.js';
import { jobIdOf, kickOff, waitForJob, type AsyncJobBody } from '../support/jobs.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const BOM = '\uFEFF';
const BULK = 1005;

const PATIENTS: Record<string, unknown>[] = [
  {
    resourceType: 'Patient',
    identifier: [{ system: 'urn:mrn', value: 'MRN-1' }],
    active: true,
    name: [{ prefix: ['Dr.'], given: ['Ann', 'Marie'], family: 'Lee', suffix: ['PhD', 'MD'] }],
    telecom: [
      { system: 'email', value: 'ann@example.org' },
      { system: 'phone', value: '555-0100' },
    ],
    gender: 'female',
    birthDate: '1980-05-01',
    address: [
      { line: ['1 Main St', 'Apt 2'], city: 'Springfield', state: 'IL', postalCode: '62701', country: 'USA' },
    ],
    maritalStatus: { text: 'Married', coding: [{ code: 'M', display: 'Married (coded)' }] },
    multipleBirthInteger: 2,
    generalPractitioner: [{ reference: 'Practitioner/gp1', display: 'Dr. Who' }],
  },
  {
    resourceType: 'Patient',
    active: false,
    name: [{ text: 'Text Only Name' }],
    gender: 'male',
    birthDate: '1990-01-01',
    address: [{ city: 'Paris', country: 'France' }],
    maritalStatus: { coding: [{ code: 'X', display: 'Display only' }] },
    multipleBirthInteger: -3,
    generalPractitioner: [{ reference: 'Practitioner/gp2' }],
  },
  {
    resourceType: 'Patient',
    name: [{ given: ['Zoë'], family: 'Ünïcødé, "Quoted"' }],
    gender: 'other',
    birthDate: '1970-01-01',
    address: [{ text: 'Line one\nLine two' }],
    maritalStatus: { coding: [{ system: 'urn:s', code: 'S' }] },
  },
  {
    resourceType: 'Patient',
    name: [{ given: ['+1', 'x'], family: '=HYPERLINK("http://evil")' }],
    telecom: [{ system: 'phone', value: '@home' }],
    gender: 'unknown',
    birthDate: '2000-01-01',
    address: [{ line: ['\tTabbed'], state: 'IL', postalCode: '60601' }],
  },
  { resourceType: 'Patient' },
];

describe.each(testDatabases())('CSV export on $name', (database) => {
  let t: TestApp;
  let dir: string;
  let p: { projectId: string; adminToken: string; memberToken: string };
  let other: { projectId: string; adminToken: string; memberToken: string };
  const ids: string[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-csv-'));
    // A job whose `_fields` mentions 'slow' pauses after each chunk, so that the cancel test can catch it running.
    const afterChunk = (job: JobRow) =>
      String(job.params.fields).includes("'slow'") ? sleep(100) : Promise.resolve();
    t = await startTestApp(database, { dataDir: dir }, { jobs: { exportPageSize: 100, afterChunk } });
    p = await t.newProject();
    other = await t.newProject();
    // One Patient per transaction: distinct meta.lastUpdated, in this order.
    for (const r of PATIENTS) {
      const res = await postBundle(t, p.adminToken, 'transaction', [createEntry(r)]);
      expect(res.statusCode, res.body).toBe(200);
      ids.push((res.json().entry[0].response.location as string).split('/')[1] as string);
    }
    const bulk = Array.from({ length: BULK }, () =>
      createEntry({ resourceType: 'Basic', code: { coding: [{ code: 'bulk' }] }, created: '2020-01-01' }),
    );
    expect((await postBundle(t, p.adminToken, 'batch', bulk)).statusCode).toBe(200);
    const res = await postBundle(t, other.adminToken, 'batch', [
      createEntry({ resourceType: 'Patient', name: [{ family: 'Other' }], gender: 'female' }),
    ]);
    expect(res.statusCode).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const csv = (type: string, query: Record<string, string>, token = p.adminToken) =>
    t.request({
      method: 'GET',
      url: `${t.fhir}/${type}/$csv?${new URLSearchParams(query).toString()}`,
      token,
    });
  const records = (body: string): string[][] => parse(body, { bom: true }) as string[][];
  const issue = (res: { json(): unknown }) =>
    (res.json() as { issue: { severity: string; code: string; details: { text: string } }[] }).issue[0];

  it('answers a CSV file: headers, BOM, one row per resource, every cell rule', async () => {
    const fields =
      'id,name,address,telecom,phone,birthDate,gender,maritalStatus,general-practitioner,identifier,active,multipleBirth';
    const res = await csv('Patient', { _fields: fields });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(res.headers['content-disposition']).toBe('attachment; filename=export.csv');
    expect(res.headers['x-total-count']).toBe('5');
    expect(res.rawPayload.subarray(0, 3)).toEqual(Buffer.from([0xef, 0xbb, 0xbf]));
    expect(res.body.startsWith(`${BOM}${fields}\r\n`)).toBe(true);
    expect(records(res.body)).toEqual([
      fields.split(','),
      [
        ids[0],
        'Dr. Ann Marie Lee PhD MD',
        '1 Main St, Apt 2, Springfield, IL 62701, USA',
        'ann@example.org',
        '555-0100',
        '1980-05-01',
        'female',
        'Married',
        'Dr. Who',
        'MRN-1',
        'true',
        '2',
      ],
      [
        ids[1],
        'Text Only Name',
        'Paris, France',
        '',
        '',
        '1990-01-01',
        'male',
        'Display only',
        'Practitioner/gp2',
        '',
        'false',
        "'-3",
      ],
      [
        ids[2],
        'Zoë Ünïcødé, "Quoted"',
        'Line one\nLine two',
        '',
        '',
        '1970-01-01',
        'other',
        'S',
        '',
        '',
        '',
        '',
      ],
      [
        ids[3],
        '\'+1 x =HYPERLINK("http://evil")',
        "'\tTabbed, IL 60601",
        "'@home",
        "'@home",
        '2000-01-01',
        'unknown',
        '',
        '',
        '',
        '',
        '',
      ],
      [ids[4], '', '', '', '', '', '', '', '', '', '', ''],
    ]);
    // RFC 4180 on the wire: quoted where needed, quotes doubled, CRLF records.
    const lines = res.body.slice(1).split('\r\n');
    expect(lines[3]).toBe(
      `${ids[2]},"Zoë Ünïcødé, ""Quoted""","Line one\nLine two",,,1970-01-01,other,S,,,,`,
    );
    expect(lines[4]).toBe(
      `${ids[3]},"'+1 x =HYPERLINK(""http://evil"")","'\tTabbed, IL 60601",'@home,'@home,2000-01-01,unknown,,,,,`,
    );
    expect(lines[6]).toBe('');
  });

  it('escapes the header row too: entries are trimmed, then escaped', async () => {
    const res = await csv('Patient', { _fields: " -1 ,'=1+1', multipleBirth ,'a,b'", gender: 'male' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.body).toBe(`${BOM}'-1,'=1+1',multipleBirth,"'a,b'"\r\n'-1,'=1+1,'-3,"a,b"\r\n`);
  });

  it('takes FHIRPath (URL-encoded), only the first value; a failure leaves the cell empty', async () => {
    const url =
      `${t.fhir}/Patient/$csv?_fields=id,telecom.where(system%3D'email').value,name.given,` +
      `name.given.substring(0%2C%203),%25resource.gender%20%3D%20'female'&_sort=birthdate`;
    const res = await t.request({ method: 'GET', url, token: p.adminToken });
    expect(res.statusCode, res.body).toBe(200);
    const rows = records(res.body);
    expect(rows[0]).toEqual([
      'id',
      "telecom.where(system='email').value",
      'name.given',
      'name.given.substring(0, 3)',
      "%resource.gender = 'female'",
    ]);
    // Sorted by birth date, no birth date last. Ann has two given names: substring fails there only.
    expect(rows.slice(1)).toEqual([
      [ids[2], '', 'Zoë', 'Zoë', 'false'],
      [ids[0], 'ann@example.org', 'Ann', '', 'true'],
      [ids[1], '', '', '', 'false'],
      [ids[3], '', "'+1", '', 'false'],
      [ids[4], '', '', '', ''],
    ]);
  });

  it('filters with search parameters and honours _sort; the default is oldest first', async () => {
    const col = async (query: Record<string, string>) =>
      records((await csv('Patient', { _fields: 'id', ...query })).body)
        .slice(1)
        .map((r) => r[0]);
    expect(await col({})).toEqual(ids);
    expect(await col({ gender: 'female,male' })).toEqual([ids[0], ids[1]]);
    expect(await col({ birthdate: 'ge1980-01-01', _sort: '-birthdate' })).toEqual([ids[3], ids[1], ids[0]]);
    expect(await col({ _sort: '-_lastUpdated' })).toEqual([...ids].reverse());
    expect(await col({ address: 'Springfield' })).toEqual([ids[0]]);
    expect(await col({ 'general-practitioner': 'Practitioner/gp2' })).toEqual([ids[1]]);
    expect(await col({ family: 'nobody' })).toEqual([]);
    // Result parameters other than _sort do not change the rows.
    expect(await col({ _count: '1', _summary: 'count', _elements: 'id' })).toEqual(ids);
    const none = await csv('Patient', { _fields: 'id,name', family: 'nobody' });
    expect(none.body).toBe(`${BOM}id,name\r\n`);
    expect(none.headers['x-total-count']).toBe('0');
  });

  it('answers at most 1000 rows; X-Total-Count tells how many matched', async () => {
    const started = Date.now();
    const res = await csv('Basic', { _fields: 'id,code,created', code: 'bulk' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-total-count']).toBe(String(BULK));
    const rows = records(res.body);
    expect(rows).toHaveLength(1001);
    expect(rows[1]?.slice(1)).toEqual(['bulk', '2020-01-01']);
    expect(new Set(rows.slice(1).map((r) => r[0])).size).toBe(1000);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('shows only what the caller may see', async () => {
    const mine = await csv('Patient', { _fields: 'name', gender: 'female' });
    expect(records(mine.body).slice(1)).toEqual([['Dr. Ann Marie Lee PhD MD']]);
    const theirs = await csv('Patient', { _fields: 'id,name' }, other.adminToken);
    expect(theirs.headers['x-total-count']).toBe('1');
    expect(
      records(theirs.body)
        .slice(1)
        .map((r) => r[1]),
    ).toEqual(['Other']);
    const member = await csv('Patient', { _fields: 'id' }, p.memberToken);
    expect(member.headers['x-total-count']).toBe('5');
    const everyone = await csv('Patient', { _fields: 'name', gender: 'female' }, t.adminToken);
    expect(records(everyone.body).slice(1).flat().sort()).toEqual(['Dr. Ann Marie Lee PhD MD', 'Other']);
    // Service types: ProjectMembership rows (references typed from Medplum's StructureDefinitions).
    const pm = await csv('ProjectMembership', { _fields: 'user,admin', _sort: '_lastUpdated' });
    expect(pm.statusCode, pm.body).toBe(200);
    expect(
      records(pm.body)
        .slice(1)
        .map((r) => r[1]),
    ).toEqual(['true', 'false']);
    expect(records(pm.body)[1]?.[0]).toMatch(/^ClientApplication\//);
  });

  it('400 invalid for each error of the contract; never 500', async () => {
    const cases: [string, Record<string, string>, string | RegExp][] = [
      ['Patient', {}, 'Missing _fields parameter'],
      ['Patient', { _fields: ' ' }, 'Missing _fields parameter'],
      ['Nope', { _fields: 'id' }, 'Unsupported resource type'],
      ['User', { _fields: 'id' }, 'Unsupported resource type'],
      ['ClientApplication', { _fields: 'id' }, 'Unsupported resource type'],
      ['Login', { _fields: 'id' }, 'Unsupported resource type'],
      ['Patient', { _fields: 'id,name.' }, /^Invalid FHIRPath expression/],
      ['Patient', { _fields: 'name.given.nope()' }, /^Invalid FHIRPath expression/],
      ['Patient', { _fields: 'id,,name' }, /^Invalid FHIRPath expression/],
      ['Patient', { _fields: 'id', nope: 'x' }, /Unknown search parameter 'nope'/],
      ['Patient', { _fields: 'id', _sort: 'nope' }, /_sort/],
      ['Patient', { _fields: 'id', birthdate: 'not-a-date' }, /Invalid date/],
    ];
    for (const [type, query, text] of cases) {
      const res = await csv(type, query);
      expect(res.statusCode, `${type} ${JSON.stringify(query)}: ${res.body}`).toBe(400);
      expect(issue(res)).toMatchObject({ severity: 'error', code: 'invalid' });
      expect(issue(res)?.details.text).toMatch(text);
    }
    expect((await csv('Patient', { _fields: 'id' }, '')).statusCode).toBe(401);
  });

  describe('CSV bulk export', () => {
    const exportCsv = (query: Record<string, string>, token = p.adminToken) =>
      kickOff(t, token, `$export?${new URLSearchParams(query).toString()}`);
    const fileOf = async (job: AsyncJobBody, token = p.adminToken) => {
      const params = job.output?.parameter ?? [];
      expect(params).toHaveLength(1);
      const url = params[0]?.part.find((x) => x.name === 'url')?.valueUri as string;
      const res = await t.request({ method: 'GET', url: url.replace('http://cinder.test', ''), token });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('text/csv; charset=utf-8');
      return { url, type: params[0]?.part.find((x) => x.name === 'type')?.valueCode, body: res.body };
    };

    it('writes the same CSV as $csv, for any number of rows', async () => {
      const fields = 'id,name,address,telecom,phone,maritalStatus,multipleBirth';
      const id = jobIdOf(await exportCsv({ _type: 'Patient', _outputFormat: 'text/csv', _fields: fields }));
      const job = await waitForJob(t, id, p.adminToken);
      expect(job.status).toBe('completed');
      const file = await fileOf(job);
      expect(file.type).toBe('Patient');
      expect(file.url).toBe(`http://cinder.test/fhir/R4/AsyncJob/${id}/output/Patient.csv`);
      expect(file.body).toBe((await csv('Patient', { _fields: fields })).body);

      // POST with a Parameters body and `csv`: 1005 rows over several pages and steps.
      const bid = jobIdOf(
        await kickOff(t, p.adminToken, '$export', {
          parameter: [
            { name: '_type', valueString: 'Basic' },
            { name: '_outputFormat', valueString: 'csv' },
            { name: '_fields', valueString: 'id,code' },
          ],
        }),
      );
      const rows = records((await fileOf(await waitForJob(t, bid, p.adminToken))).body);
      expect(rows[0]).toEqual(['id', 'code']);
      expect(rows).toHaveLength(BULK + 1);
      expect(new Set(rows.slice(1).map((r) => r[0])).size).toBe(BULK);

      // A type without rows still has its file: the BOM and header row.
      const eid = jobIdOf(await exportCsv({ _type: 'Account', _outputFormat: 'text/csv', _fields: 'id' }));
      expect((await fileOf(await waitForJob(t, eid, p.adminToken))).body).toBe(`${BOM}id\r\n`);
    });

    it('kick-off errors: _fields, exactly one _type, supported type, FHIRPath', async () => {
      const cases: [Record<string, string>, string | RegExp][] = [
        [{ _type: 'Patient', _outputFormat: 'text/csv' }, 'Missing _fields parameter'],
        [{ _outputFormat: 'text/csv', _fields: 'id' }, /exactly one resource type/],
        [{ _type: 'Patient,Basic', _outputFormat: 'text/csv', _fields: 'id' }, /exactly one resource type/],
        [{ _type: 'User', _outputFormat: 'csv', _fields: 'id' }, 'Unsupported resource type'],
        [{ _type: 'Patient', _outputFormat: 'csv', _fields: 'name.' }, /^Invalid FHIRPath expression/],
        [{ _type: 'Patient', _outputFormat: 'text/plain', _fields: 'id' }, /Unsupported _outputFormat/],
      ];
      for (const [query, text] of cases) {
        const res = await exportCsv(query);
        expect(res.statusCode, `${JSON.stringify(query)}: ${res.body}`).toBe(400);
        expect(issue(res)).toMatchObject({ severity: 'error', code: 'invalid' });
        expect(issue(res)?.details.text).toMatch(text);
      }
    });

    it('$cancel stops a running CSV export and deletes its file', async () => {
      const id = jobIdOf(
        await exportCsv({ _type: 'Basic', _outputFormat: 'text/csv', _fields: "id,'slow'" }),
      );
      const file = path.join(dir, 'files', 'exports', id, 'Basic.csv');
      const until = Date.now() + 10_000;
      while (!fs.existsSync(file)) {
        if (Date.now() > until) throw new Error('export did not start');
        await sleep(20);
      }
      const res = await t.request({
        method: 'POST',
        url: `${t.fhir}/AsyncJob/${id}/$cancel`,
        token: p.adminToken,
      });
      expect(res.statusCode).toBe(200);
      const cancelledAt = Date.now();
      while (fs.existsSync(path.dirname(file))) {
        expect(Date.now() - cancelledAt).toBeLessThan(2000);
        await sleep(20);
      }
      const job = await t.request({ method: 'GET', url: `${t.fhir}/AsyncJob/${id}`, token: p.adminToken });
      expect(job.json()).toMatchObject({ status: 'cancelled' });
      expect(job.json().output).toBeUndefined();
      const get = await t.request({
        method: 'GET',
        url: `${t.fhir}/AsyncJob/${id}/output/Basic.csv`,
        token: p.adminToken,
      });
      expect(get.statusCode).toBe(404);
    });

    it('a resumed job cuts its file back to the checkpoint: the file is as if it never died', async () => {
      const files = localFileStore(path.join(dir, 'resume'));
      const env = {
        db: t.db,
        files,
        fhirBase: 'http://cinder.test/fhir/R4',
        clock: () => new Date(),
        newId: randomUUID,
      };
      const params: ExportParams = {
        level: 'system',
        types: ['Patient'],
        since: null,
        projectId: p.projectId,
        format: 'csv',
        fields: 'id,name,address',
      };
      const kind = exportKind({ pageSize: 2, pagesPerStep: 1 });
      const run = async (jobId: string, crashAfter?: number): Promise<string> => {
        const job = { id: jobId, params } as unknown as JobRow;
        let state = await kind.start(env, job);
        for (let step = 1; ; step++) {
          const r = await kind.runStep(env, job, state);
          if (r.done) break;
          if (step === crashAfter) {
            // The worker wrote more and died before its next checkpoint; another one resumes.
            await files.append(`exports/${jobId}/Patient.csv`, 'half a row,"');
            await kind.resume(env, job, r.state);
          }
          state = r.state;
        }
        const stream = await files.read(`exports/${jobId}/Patient.csv`);
        let text = '';
        for await (const chunk of stream as AsyncIterable<Buffer>) text += chunk.toString('utf8');
        return text;
      };
      const clean = await run('clean');
      expect(clean).toBe((await csv('Patient', { _fields: 'id,name,address' })).body);
      expect(await run('crashed', 1)).toBe(clean);
      expect(await run('crashed-late', 2)).toBe(clean);
    });
  });
});
