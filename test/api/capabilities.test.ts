// The CapabilityStatement lists exactly what works (issue 14): every search parameter, _include and _revinclude
// value it names for a type is accepted by that type's search, and what it leaves out (special parameters) is not;
// it lists both subscription channel types and, for an authenticated caller, its project's active SubscriptionTopics
// (API.md §8).
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  CHANNEL_TYPE_EXTENSION,
  capabilityStatement,
  withSubscriptionTopics,
} from '../../src/fhir/capabilities.js';
import { EXT } from '../../src/fhir/subscriptions/model.js';
import { parseSearchRequest } from '../../src/fhir/search/parse.js';
import { getSearchParam } from '../../src/fhir/search/registry.js';
import { testDatabases } from '../support/db.js';
import { useProjectApp } from '../support/app.js';

interface CsResource {
  type: string;
  extension?: { url: string; valueCode?: string; valueCanonical?: string }[];
  searchParam: { name: string; type: string }[];
  searchInclude: string[];
  searchRevInclude: string[];
  interaction: { code: string }[];
}

const SAMPLE: Record<string, string> = {
  string: 'x',
  token: 'x',
  reference: 'x',
  date: '2020',
  number: '1',
  quantity: '1',
  uri: 'http://x',
};

/** A value the parameter accepts: composites get one sample per component, joined by `$`. */
function sample(type: string, code: string, paramType: string): string {
  if (paramType !== 'composite') return SAMPLE[paramType] as string;
  const comps = getSearchParam(type, code)?.components ?? [];
  return comps.map((c) => SAMPLE[c.type]).join('$');
}

describe.each(testDatabases().slice(-1))('CapabilityStatement on $name', (database) => {
  const ctx = useProjectApp(database);

  it('lists only search parameters, includes and revincludes that the search accepts', async () => {
    const res = await ctx.t.request({ method: 'GET', url: `${ctx.t.fhir}/metadata` });
    const cs = res.json() as { rest: { resource: CsResource[]; security: { cors: boolean } }[] };
    const rest = cs.rest[0] as (typeof cs.rest)[0];
    expect(rest.security.cors).toBe(true);
    let checked = 0;
    for (const r of rest.resource) {
      for (const p of r.searchParam) {
        expect(
          () => parseSearchRequest(r.type, { [p.name]: sample(r.type, p.name, p.type) }),
          `${r.type}?${p.name}`,
        ).not.toThrow();
        checked++;
      }
      for (const inc of r.searchInclude)
        expect(() => parseSearchRequest(r.type, { _include: inc })).not.toThrow();
      for (const inc of r.searchRevInclude)
        expect(() => parseSearchRequest(r.type, { _revinclude: inc })).not.toThrow();
      // Special parameters (e.g. Location `near`) are not supported, and not listed.
      for (const name of ['near', '_list', '_query', '_filter']) {
        expect(r.searchParam.map((p) => p.name)).not.toContain(name);
      }
      // Full text (API.md §11): `_content` on every type, `_text` on every type with a narrative; not on the audit
      // trail, which has its own short list.
      if (r.type === 'AuditEvent') continue;
      expect(r.searchParam.map((p) => p.name)).toContain('_content');
      if (r.type !== 'Bundle' && r.type !== 'Binary' && r.type !== 'Parameters')
        expect(
          r.searchParam.map((p) => p.name),
          r.type,
        ).toContain('_text');
      else
        expect(
          r.searchParam.map((p) => p.name),
          r.type,
        ).not.toContain('_text');
    }
    expect(checked).toBeGreaterThan(1000);
    const obs = rest.resource.find((r) => r.type === 'Observation') as CsResource;
    expect(obs.searchParam.map((p) => p.name)).toEqual(
      expect.arrayContaining([
        'code-value-quantity',
        'component-code-value-quantity',
        'combo-code-value-concept',
      ]),
    );
    expect(obs.searchInclude).toContain('Observation:subject');
    const patient = rest.resource.find((r) => r.type === 'Patient') as CsResource;
    expect(patient.searchRevInclude).toEqual(
      expect.arrayContaining(['*', 'Observation:subject', 'Encounter:patient']),
    );
    // A composite and a search on a listed parameter answer 200 through HTTP.
    for (const q of ['Observation?code-value-quantity=x$1', 'Patient?_revinclude=Observation:subject']) {
      const s = await ctx.t.request({ method: 'GET', url: `${ctx.t.fhir}/${q}`, token: ctx.token });
      expect(s.statusCode, q).toBe(200);
    }
    const near = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/Location?near=1|1|1|km`,
      token: ctx.token,
    });
    expect(near.statusCode).toBeGreaterThanOrEqual(400);
    expect(near.json().resourceType).toBe('OperationOutcome');
  });
});

type Statement = { rest: { resource: CsResource[] }[] };
const subscriptionEntry = (cs: unknown): CsResource =>
  (cs as Statement).rest[0]?.resource.find((r) => r.type === 'Subscription') as CsResource;
const topicsOf = (cs: unknown): string[] =>
  (subscriptionEntry(cs).extension ?? [])
    .filter((e) => e.url === EXT.capabilityTopic)
    .map((e) => e.valueCanonical as string);

describe('CapabilityStatement builder', () => {
  it('lists both channel types on Subscription and one topic extension per URL, without changing its input', () => {
    const base = capabilityStatement('http://x/fhir/R4', new Date(0));
    const channels = (subscriptionEntry(base).extension ?? []).filter(
      (e) => e.url === CHANNEL_TYPE_EXTENSION,
    );
    expect(channels.map((e) => e.valueCode)).toEqual(['rest-hook', 'websocket']);
    expect(topicsOf(base)).toEqual([]);
    const urls = ['http://example.org/topic/a', 'http://example.org/topic/b'];
    const withTopics = withSubscriptionTopics(base, urls);
    expect(topicsOf(withTopics)).toEqual(urls);
    // The channel extensions stay, first; the other entries are the same objects.
    expect(subscriptionEntry(withTopics).extension?.slice(0, 2)).toEqual(channels);
    expect(topicsOf(base)).toEqual([]);
    expect(topicsOf(capabilityStatement('http://x/fhir/R4', new Date(0), urls))).toEqual(urls);
    const patient = (s: unknown) => (s as Statement).rest[0]?.resource.find((r) => r.type === 'Patient');
    expect(patient(withTopics)).toBe(patient(base));
  });
});

describe.each(testDatabases())('CapabilityStatement topics on $name', (database) => {
  const ctx = useProjectApp(database);

  /**
   * A SubscriptionTopic row written straight into `resources`: the type is not registered on this branch (another
   * part of issue 26 adds it), and the lookup reads the generic table, so it needs no more than this.
   */
  const insertTopic = async (projectId: string, url: string, status: string, deleted = false) => {
    const id = randomUUID();
    await ctx.t.db.query(
      `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
       VALUES ('SubscriptionTopic', $1, $2, 1, now(), $3, $4)`,
      [
        id,
        projectId,
        deleted,
        JSON.stringify({ resourceType: 'SubscriptionTopic', id, url, status, meta: { project: projectId } }),
      ],
    );
  };

  const metadata = async (token?: string | null, authorization?: string) => {
    const res = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/metadata`,
      ...(token ? { token } : {}),
      ...(authorization ? { headers: { authorization } } : {}),
    });
    expect(res.statusCode, res.body).toBe(200);
    return res;
  };

  it("lists the caller's project's active topics for an authenticated caller, none for an anonymous one", async () => {
    const a = await ctx.t.newProject('Topics A');
    const b = await ctx.t.newProject('Topics B');
    const tag = randomUUID().slice(0, 8);
    const url = (name: string) => `http://example.org/${tag}/SubscriptionTopic/${name}`;
    await insertTopic(a.projectId, url('a-active'), 'active');
    await insertTopic(a.projectId, url('a-active'), 'active'); // the same URL twice: listed once
    await insertTopic(a.projectId, url('a-2-active'), 'active');
    await insertTopic(a.projectId, url('a-draft'), 'draft');
    await insertTopic(a.projectId, url('a-retired'), 'retired');
    await insertTopic(a.projectId, url('a-deleted'), 'active', true);
    await insertTopic(b.projectId, url('b-active'), 'active');

    const anonymous = await metadata();
    expect(topicsOf(anonymous.json())).toEqual([]);
    expect(String(anonymous.headers.vary)).toMatch(/Authorization/);
    const channels = (subscriptionEntry(anonymous.json()).extension ?? []).map((e) => e.valueCode);
    expect(channels).toEqual(['rest-hook', 'websocket']);

    const forA = await metadata(a.memberToken);
    expect(topicsOf(forA.json())).toEqual([url('a-2-active'), url('a-active')]);
    expect(String(forA.headers.vary)).toMatch(/Authorization/);
    expect(topicsOf((await metadata(b.adminToken)).json())).toEqual([url('b-active')]);
    // A project without topics: the public statement, word for word.
    expect((await metadata(ctx.token)).body).toBe(anonymous.body);
    // A token that does not authenticate leaves /metadata public: 200 and no topics, never a 401.
    expect((await metadata(null, 'Bearer not-a-token')).body).toBe(anonymous.body);
    expect((await metadata(null, 'Basic abc')).body).toBe(anonymous.body);
  });
});
