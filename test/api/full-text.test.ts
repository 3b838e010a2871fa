// `_text` (the narrative) and `_content` (the whole resource) through HTTP (API.md §11 "Search", R4 search.html#text):
// words matched case- and accent-insensitively, AND'ed within a value, OR'ed across commas, `word*` a prefix; with
// other parameters, `_count`, paging, `_sort`, `_total`, chains; updates, deletes and transactions keep the words
// current and `$reindex` writes those of resources stored before. Another project's resources and a patient's
// neighbours are never found; hostile values answer 4xx (or 200) with an OperationOutcome, never 5xx. And token
// `:text` keeps its prefix meaning now that an index answers it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  created,
  inviteRequest,
  postBundle,
  scopedClientToken,
  setUserPassword,
  startTestApp,
  type TestApp,
} from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { jobIdOf, kickOff, waitForJob } from '../support/jobs.js';
import { smartLaunch } from '../support/smart-browser.js';

type Json = Record<string, unknown>;
type Bundle = { entry?: { resource: Json }[]; total?: number; link?: { relation: string; url: string }[] };

const PASSWORD = 'a long and correct password';
const REDIRECT = 'https://app.example/callback';
const LOINC = 'http://loinc.org';

const narrative = (html: string): Json => ({
  status: 'generated',
  div: `<div xmlns="http://www.w3.org/1999/xhtml">${html}</div>`,
});

describe.each(testDatabases())('_text and _content on $name', (database) => {
  let t: TestApp;
  let a: { projectId: string; adminToken: string; memberToken: string };
  let b: { projectId: string; adminToken: string; memberToken: string };
  const id: Record<string, string> = {};

  const get = (token: string, query: string) =>
    t.request({ method: 'GET', url: `${t.fhir}/${query}`, token });
  /** The keys (of `id`) of what a search finds, sorted unless `ordered`. */
  const found = async (query: string, token = a.adminToken, ordered = false): Promise<string[]> => {
    const res = await get(token, `${query}${query.includes('?') ? '&' : '?'}_count=100`);
    expect(res.statusCode, `${query}: ${res.body}`).toBe(200);
    const names = new Map(Object.entries(id).map(([k, v]) => [v, k]));
    const keys = ((res.json() as Bundle).entry ?? []).map((e) => names.get(e.resource.id as string) ?? '?');
    return ordered ? keys : keys.sort();
  };
  const refused = async (query: string, token = a.adminToken) => {
    const res = await get(token, query);
    const body = res.json() as { resourceType: string; issue: { code: string }[] };
    expect(body.resourceType, res.body).toBe('OperationOutcome');
    return { status: res.statusCode, code: body.issue[0]?.code };
  };
  const make = async (key: string, resource: Json, token = a.adminToken): Promise<void> => {
    id[key] = (await created(t, token, resource)).id as string;
  };

  beforeAll(async () => {
    t = await startTestApp(database, {}, { jobs: {} });
    a = await t.newProject('Full text A');
    b = await t.newProject('Full text B');
    await make('ana', {
      resourceType: 'Patient',
      text: narrative('<p>Ana <b>Müller</b> lives in Zürich &amp; likes <i>café</i> au lait</p>'),
      name: [{ family: 'Müller', given: ['Ana'] }],
      address: [{ city: 'Basel' }],
    });
    await make('bob', {
      resourceType: 'Patient',
      text: narrative('<p>Bob Brown, retired sailor</p>'),
      name: [{ family: 'Brown', given: ['Bob'] }],
      address: [{ city: 'Zürich' }],
    });
    await make('bp', {
      resourceType: 'Observation',
      status: 'final',
      text: narrative('Blood pressure high'),
      code: { coding: [{ system: LOINC, code: '85354-9', display: 'Blood pressure panel' }] },
      subject: { reference: `Patient/${id.ana}` },
      note: [{ text: 'Patient reports essential hypertension since 2019' }],
    });
    await make('hr', {
      resourceType: 'Observation',
      status: 'preliminary',
      text: narrative('Heart rate normal'),
      code: { coding: [{ system: LOINC, code: '8867-4', display: 'Heart rate' }], text: 'Heart rate' },
      subject: { reference: `Patient/${id.bob}` },
      valueQuantity: { value: 72, unit: 'beats/minute' },
    });
    await make('wt', {
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'Body weight' },
      subject: { reference: `Patient/${id.ana}` },
      note: [{ text: 'Measured with high precision scale' }],
    });
    // Another project's resources with the same words.
    await make('bAna', { resourceType: 'Patient', text: narrative('Ana Müller Zürich café') }, b.adminToken);
    await make(
      'bBp',
      {
        resourceType: 'Observation',
        status: 'final',
        text: narrative('Blood pressure high'),
        code: { text: 'Blood pressure panel' },
        note: [{ text: 'essential hypertension' }],
      },
      b.adminToken,
    );
  }, 120_000);
  afterAll(async () => t?.close());

  it('_text matches words of the narrative, case- and accent-insensitive, tags and entities read as text', async () => {
    expect(await found('Patient?_text=muller')).toEqual(['ana']);
    expect(await found('Patient?_text=MÜLLER')).toEqual(['ana']);
    expect(await found('Patient?_text=Cafe')).toEqual(['ana']);
    expect(await found('Patient?_text=zurich')).toEqual(['ana']); // Bob's Zürich is his address, not his narrative
    // Markup is not text: tag and attribute names, the XHTML namespace, an entity's name.
    for (const word of ['div', 'xhtml', 'www', 'amp', 'b'])
      expect(await found(`Patient?_text=${word}`), word).toEqual([]);
    expect(await found('Observation?_text=pressure')).toEqual(['bp']);
    // Only the narrative: the note's words are not in it.
    expect(await found('Observation?_text=hypertension')).toEqual([]);
  });

  it('_content matches words of every string of the resource, narrative included', async () => {
    expect(await found('Patient?_content=zurich')).toEqual(['ana', 'bob']);
    expect(await found('Patient?_content=basel')).toEqual(['ana']);
    expect(await found('Observation?_content=hypertension')).toEqual(['bp']);
    expect(await found('Observation?_content=85354')).toEqual(['bp']); // a code
    expect(await found('Observation?_content=normal')).toEqual(['hr']); // its narrative
    expect(await found('Observation?_content=beats')).toEqual(['hr']);
    // Not the resource's id nor meta (bookkeeping), and never a word in another project.
    expect(await found(`Observation?_content=${id.bp}`)).toEqual([]);
    expect(await found('Observation?_content=final')).toEqual(['bp', 'wt']);
  });

  it('words are AND’ed, commas OR, whole words unless `*`', async () => {
    expect(await found('Observation?_content=blood%20high')).toEqual(['bp']);
    expect(await found('Observation?_content=high')).toEqual(['bp', 'wt']);
    expect(await found('Observation?_content=blood%20heart')).toEqual([]);
    expect(await found('Observation?_content=blood,heart')).toEqual(['bp', 'hr']);
    // Repeated parameters AND.
    expect(await found('Observation?_content=high&_content=scale')).toEqual(['wt']);
    expect(await found('Observation?_content=hyper')).toEqual([]);
    expect(await found('Observation?_content=hyper*')).toEqual(['bp']);
    expect(await found('Observation?_content=HYPERT*%20ESSENTIAL')).toEqual(['bp']);
    // Punctuation separates words, in the resource and in the query alike.
    expect(await found('Observation?_content=beats-minute')).toEqual(['hr']);
  });

  it('combines with other parameters, _count, paging, _sort, _total and chains', async () => {
    expect(await found('Observation?_content=high&status=final')).toEqual(['bp', 'wt']);
    expect(await found('Observation?_content=high&status=preliminary')).toEqual([]);
    expect(await found(`Observation?_content=high&subject=Patient/${id.ana}`)).toEqual(['bp', 'wt']);
    expect(await found('Observation?_content=final,normal&_sort=code')).toHaveLength(3);
    // _sort by status, descending: preliminary before final.
    const sorted = await found('Observation?_content=final,normal&_sort=-status,_id', a.adminToken, true);
    expect(sorted[0]).toBe('hr');
    // Pages of one through the next link, with the total.
    const first = await get(a.adminToken, 'Observation?_content=final,normal&_count=1&_total=accurate');
    const bundle = first.json() as Bundle;
    expect(bundle.total).toBe(3);
    expect(bundle.entry).toHaveLength(1);
    const seen = [bundle.entry?.[0]?.resource.id];
    let next = bundle.link?.find((l) => l.relation === 'next')?.url;
    while (next) {
      const page = (
        await t.request({ method: 'GET', url: next.replace('http://cinder.test', ''), token: a.adminToken })
      ).json() as Bundle;
      seen.push(...(page.entry ?? []).map((e) => e.resource.id));
      next = page.link?.find((l) => l.relation === 'next')?.url;
    }
    expect(seen.sort()).toEqual([id.bp, id.hr, id.wt].sort());
    // _summary=count, a chain and _has.
    const count = await get(a.adminToken, 'Observation?_content=high&_summary=count');
    expect((count.json() as Bundle).total).toBe(2);
    expect(await found('Observation?subject:Patient._text=sailor')).toEqual(['hr']);
    expect(await found('Patient?_has:Observation:subject:_content=hypertension')).toEqual(['ana']);
    // POST _search reads the same parameters.
    const post = await t.request({
      method: 'POST',
      url: `${t.fhir}/Observation/_search`,
      token: a.adminToken,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: '_content=hypertension',
    });
    expect(post.statusCode, post.body).toBe(200);
    expect((post.json() as Bundle).entry?.map((e) => e.resource.id)).toEqual([id.bp]);
  });

  it('updates, deletes and transactions keep the words current', async () => {
    await make('tmp', { resourceType: 'Observation', status: 'final', code: { text: 'Glucose fasting' } });
    expect(await found('Observation?_content=glucose')).toEqual(['tmp']);
    const put = await t.request({
      method: 'PUT',
      url: `${t.fhir}/Observation/${id.tmp}`,
      token: a.adminToken,
      payload: { resourceType: 'Observation', id: id.tmp, status: 'final', code: { text: 'Cholesterol' } },
    });
    expect(put.statusCode, put.body).toBe(200);
    expect(await found('Observation?_content=glucose')).toEqual([]);
    expect(await found('Observation?_content=cholesterol')).toEqual(['tmp']);
    const del = await t.request({
      method: 'DELETE',
      url: `${t.fhir}/Observation/${id.tmp}`,
      token: a.adminToken,
    });
    expect(del.statusCode).toBeLessThan(300);
    expect(await found('Observation?_content=cholesterol')).toEqual([]);
    const tx = await postBundle(t, a.adminToken, 'transaction', [
      {
        fullUrl: 'urn:uuid:6f1e2c8a-0000-4000-8000-000000000001',
        resource: { resourceType: 'Patient', text: narrative('Transactional Tilda') },
        request: { method: 'POST', url: 'Patient' },
      },
    ]);
    expect(tx.statusCode, tx.body).toBe(200);
    const location = (tx.json() as { entry: { response: { location: string } }[] }).entry[0]?.response
      .location;
    id.tilda = (location as string).split('/')[1] as string;
    expect(await found('Patient?_text=tilda')).toEqual(['tilda']);
  });

  it('$reindex writes the words of resources stored before the index existed', async () => {
    await make('old', { resourceType: 'Observation', status: 'final', code: { text: 'Ferritin level' } });
    // As a resource written before migration 019: no words stored.
    await t.db.query('DELETE FROM sp_text WHERE rid = (SELECT rid FROM resources WHERE id = $1)', [id.old]);
    expect(await found('Observation?_content=ferritin')).toEqual([]);
    const job = jobIdOf(
      await kickOff(t, t.adminToken, '$reindex', {
        parameter: [{ name: '_type', valueString: 'Observation' }],
      }),
    );
    expect((await waitForJob(t, job, t.adminToken)).status).toBe('completed');
    expect(await found('Observation?_content=ferritin')).toEqual(['old']);
    // One row of words per resource, none left behind by the rewrite.
    const rows = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM sp_text WHERE rid = (SELECT rid FROM resources WHERE id = $1)',
      [id.old],
    );
    expect(rows.rows[0]?.n).toBe(1);
  });

  it('another project’s member never finds this project’s resources, nor the other way round', async () => {
    expect(await found('Patient?_text=muller', b.adminToken)).toEqual(['bAna']);
    expect(await found('Observation?_content=hypertension', b.memberToken)).toEqual(['bBp']);
    expect(await found('Observation?_content=hypertension', a.memberToken)).toEqual(['bp']);
    // Through a chain and _has too.
    expect(await found('Patient?_has:Observation:subject:_content=hypertension', b.adminToken)).toEqual([]);
  });

  it('a narrowly scoped token finds only what its scopes allow', async () => {
    const patientOnly = await scopedClientToken(t, a.adminToken, a.projectId, 'system/Patient.rs');
    expect(await found('Patient?_content=zurich', patientOnly)).toEqual(['ana', 'bob']);
    expect((await get(patientOnly, 'Observation?_content=hypertension')).statusCode).toBe(403);
    expect((await get(patientOnly, 'Patient?_has:Observation:subject:_content=blood')).statusCode).toBe(403);
    // A patient's launch with patient/Observation.rs: only that patient's Observations, whatever the words.
    await t.request({
      method: 'PUT',
      url: `${t.fhir}/ClientApplication/fulltext-app`,
      token: a.adminToken,
      payload: { resourceType: 'ClientApplication', id: 'fulltext-app', name: 'App', redirectUri: REDIRECT },
    });
    const invite = await inviteRequest(t, a.adminToken, a.projectId, {
      resourceType: 'Patient',
      firstName: 'Pia',
      lastName: 'Patient',
      email: 'pia@fulltext.example',
    });
    expect(invite.statusCode, invite.body).toBe(200);
    const m = invite.json() as { user: { reference: string }; profile: { reference: string } };
    await setUserPassword(t, m.user.reference.split('/')[1] as string, PASSWORD);
    const me = m.profile.reference.split('/')[1] as string;
    await make('mine', {
      resourceType: 'Observation',
      status: 'final',
      text: narrative('Blood pressure high'),
      code: { text: 'Blood pressure' },
      subject: { reference: `Patient/${me}` },
    });
    const launched = await smartLaunch(t.app, {
      clientId: 'fulltext-app',
      redirectUri: REDIRECT,
      aud: 'http://cinder.test/fhir/R4',
      email: 'pia@fulltext.example',
      password: PASSWORD,
      scope: 'launch/patient patient/Observation.rs',
    });
    const patientToken = launched.access_token as string;
    expect(await found('Observation?_text=blood', patientToken)).toEqual(['mine']);
    expect(await found('Observation?_content=high', patientToken)).toEqual(['mine']);
    expect(await found('Observation?_content=hypertension', patientToken)).toEqual([]);
    expect(await found('Observation?_text=blood')).toEqual(['bp', 'mine']);
    expect((await get(patientToken, 'Patient?_text=muller')).statusCode).toBe(403);
  });

  it('hostile values answer 4xx or a plain match, never 5xx; an empty value is ignored', async () => {
    // tsquery syntax and special characters are punctuation between words.
    for (const v of [
      'blood & !high',
      'blood | heart',
      "'blood':*",
      'blood <-> pressure',
      '(blood)',
      'a:b*c',
    ]) {
      const res = await get(a.adminToken, `Observation?_content=${encodeURIComponent(v)}`);
      expect(res.statusCode, `${v}: ${res.body}`).toBe(200);
    }
    expect(await found(`Observation?_content=${encodeURIComponent('blood & !high')}`)).toEqual([
      'bp',
      'mine',
    ]);
    expect(await found(`Observation?_content=${encodeURIComponent("'blood':*")}`)).toEqual(['bp', 'mine']);
    // No words at all: 400.
    for (const v of ["& | ! : * ( ) '", '***', '%', '\\']) {
      const r = await refused(`Observation?_content=${encodeURIComponent(v)}`);
      expect(r.status, v).toBe(400);
      expect(r.code).toBe('invalid');
    }
    // 10k characters: too long (400); 40 words: too many (400); one word of 2000 letters: no match.
    const huge = await refused(`Observation?_text=${'a b '.repeat(2500)}`);
    expect(huge.status).toBe(400);
    const many = await refused(`Observation?_text=${encodeURIComponent(Array(40).fill('w').join(' '))}`);
    expect(many.status).toBe(400);
    expect(await found(`Observation?_content=${'x'.repeat(2000)}`)).toEqual([]);
    // Deep: 10 comma alternatives of many words each stay a plain search.
    const alternatives = Array.from({ length: 10 }, (_, i) => `blood pressure high w${i}`).join(',');
    expect(await found(`Observation?_content=${encodeURIComponent(alternatives)}`)).toEqual([]);
    // A resource of 30,000 distinct words is stored and searchable (its words beyond the index's share are not).
    const big = await t.request({
      method: 'POST',
      url: `${t.fhir}/Observation`,
      token: b.adminToken,
      payload: {
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'Big' },
        note: [{ text: Array.from({ length: 30_000 }, (_, i) => `bigword${i}`).join(' ') }],
      },
    });
    expect(big.statusCode, big.body).toBe(201);
    const bigFound = await get(b.adminToken, 'Observation?_content=bigword17');
    expect((bigFound.json() as Bundle).entry?.map((e) => e.resource.id)).toEqual([big.json().id]);
    // Modifiers do not apply; `_text` on a type without narrative is unknown.
    expect((await refused('Observation?_text:exact=blood')).status).toBe(400);
    expect((await refused('Observation?_content:missing=true')).status).toBe(400);
    expect((await refused('Bundle?_text=blood')).status).toBe(400);
    expect((await get(a.adminToken, 'Bundle?_content=blood')).statusCode).toBe(200);
    // Empty: ignored, as any empty parameter value.
    const all = await found('Patient');
    expect(all.length).toBeGreaterThan(2);
    expect(await found('Patient?_text=')).toEqual(all);
    // The audit trail has no full text: refused, not a failure.
    const audit = await get(a.adminToken, 'AuditEvent?_content=blood');
    expect(audit.statusCode, audit.body).toBeGreaterThanOrEqual(400);
    expect(audit.statusCode, audit.body).toBeLessThan(500);
  });

  it('Subscription criteria with _text or _content are refused when saved', async () => {
    for (const criteria of ['Observation?_content=blood', 'Patient?_text=muller']) {
      const res = await t.request({
        method: 'POST',
        url: `${t.fhir}/Subscription`,
        token: a.adminToken,
        payload: {
          resourceType: 'Subscription',
          status: 'requested',
          reason: 'x',
          criteria,
          channel: { type: 'websocket' },
        },
      });
      expect(res.statusCode, `${criteria}: ${res.body}`).toBe(400);
      expect(res.body, criteria).toMatch(/_text|_content/);
    }
  });

  it('token :text still matches the start of a code’s text or display', async () => {
    expect(await found('Observation?code:text=heart')).toEqual(['hr']);
    expect(await found('Observation?code:text=HEART%20R')).toEqual(['hr']);
    expect(await found('Observation?code:text=rate')).toEqual([]);
    expect(await found('Observation?code:text=blood')).toEqual(['bp', 'mine']);
    expect(await found('Observation?code:text=body')).toEqual(['wt']);
    expect(await found(`Observation?code:text=${encodeURIComponent('%_\\')}`)).toEqual([]);
  });
});
