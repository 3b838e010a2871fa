// SubscriptionTopic as a stored resource type shaped as R5's (API.md §8, https://hl7.org/fhir/R5/subscriptiontopic.html):
// validated against R5's structure, project-scoped, searchable by R5's parameters (url, status, title, version,
// derived-or-self, resource, identifier, date, ...).
import { describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { created, postResource, useProjectApp } from '../support/app.js';

const topic = (name: string): Record<string, unknown> => ({
  resourceType: 'SubscriptionTopic',
  url: `https://example.org/topics/${name}`,
  identifier: [{ system: 'https://example.org/topic-ids', value: name }],
  version: '1.0.0',
  title: `Encounter finished (${name})`,
  status: 'active',
  date: '2024-03-01',
  derivedFrom: ['http://hl7.org/SubscriptionTopic/encounter-complete'],
  resourceTrigger: [
    {
      description: 'An Encounter is finished',
      resource: 'http://hl7.org/fhir/StructureDefinition/Encounter',
      supportedInteraction: ['create', 'update'],
      queryCriteria: {
        previous: 'status:not=finished',
        resultForCreate: 'test-passes',
        current: 'status=finished',
        resultForDelete: 'test-fails',
        requireBoth: true,
      },
      fhirPathCriteria: "%current.status = 'finished'",
    },
  ],
  canFilterBy: [
    {
      description: 'The patient of the encounter',
      resource: 'Encounter',
      filterParameter: 'patient',
      filterDefinition: 'http://hl7.org/fhir/SearchParameter/clinical-patient',
    },
  ],
  notificationShape: [{ resource: 'Encounter', include: ['Encounter:patient'] }],
});

const ids = (body: { entry?: { resource: { id: string } }[] }): string[] =>
  (body.entry ?? []).map((e) => e.resource.id);

describe.each(testDatabases())('SubscriptionTopic resources on $name', (database) => {
  const ctx = useProjectApp(database);

  it('stores, reads, updates and searches topics by the R5 parameters', async () => {
    const name = `enc-${Date.now()}`;
    const t = await created(ctx.t, ctx.token, topic(name));
    const read = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/SubscriptionTopic/${String(t.id)}`,
      token: ctx.token,
    });
    expect(read.statusCode).toBe(200);
    expect(read.json().resourceTrigger[0].queryCriteria).toEqual({
      previous: 'status:not=finished',
      resultForCreate: 'test-passes',
      current: 'status=finished',
      resultForDelete: 'test-fails',
      requireBoth: true,
    });
    for (const q of [
      `url=https://example.org/topics/${name}`,
      `identifier=https://example.org/topic-ids|${name}`,
      `title=${encodeURIComponent(`Encounter finished (${name})`)}`,
      `status=active&url=https://example.org/topics/${name}`,
      `version=1.0.0&url=https://example.org/topics/${name}`,
      `date=2024-03-01&url=https://example.org/topics/${name}`,
      `resource=http://hl7.org/fhir/StructureDefinition/Encounter&url=https://example.org/topics/${name}`,
      `derived-or-self=https://example.org/topics/${name}`,
      `derived-or-self=http://hl7.org/SubscriptionTopic/encounter-complete&identifier=${name}`,
      `trigger-description=${encodeURIComponent('An Encounter is finished')}&identifier=${name}`,
    ]) {
      const s = await ctx.t.request({
        method: 'GET',
        url: `${ctx.t.fhir}/SubscriptionTopic?${q}`,
        token: ctx.token,
      });
      expect(s.statusCode, q).toBe(200);
      expect(ids(s.json()), q).toEqual([t.id]);
    }
    const none = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/SubscriptionTopic?url=https://example.org/topics/${name}&status=retired`,
      token: ctx.token,
    });
    expect(ids(none.json())).toEqual([]);

    const updated = await ctx.t.request({
      method: 'PUT',
      url: `${ctx.t.fhir}/SubscriptionTopic/${String(t.id)}`,
      token: ctx.token,
      payload: { ...topic(name), id: t.id, status: 'retired' },
    });
    expect(updated.statusCode, updated.body).toBe(200);
    const retired = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/SubscriptionTopic?status=retired&url=https://example.org/topics/${name}`,
      token: ctx.token,
    });
    expect(ids(retired.json())).toEqual([t.id]);
  });

  it('keeps topics within their project', async () => {
    const name = `iso-${Date.now()}`;
    const t = await created(ctx.t, ctx.token, topic(name));
    const other = (await ctx.t.newProject()).adminToken;
    const hidden = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/SubscriptionTopic/${String(t.id)}`,
      token: other,
    });
    expect(hidden.statusCode).toBe(404);
    const search = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/SubscriptionTopic?url=https://example.org/topics/${name}`,
      token: other,
    });
    expect(search.statusCode).toBe(200);
    expect(ids(search.json())).toEqual([]);
    const overwrite = await ctx.t.request({
      method: 'PUT',
      url: `${ctx.t.fhir}/SubscriptionTopic/${String(t.id)}`,
      token: other,
      payload: { ...topic(name), id: t.id, status: 'retired' },
    });
    expect(overwrite.statusCode).toBe(404);
    const still = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/SubscriptionTopic/${String(t.id)}`,
      token: ctx.token,
    });
    expect(still.json().status).toBe('active');
  });

  it('refuses a topic that does not follow R5 structure, naming the elements', async () => {
    const bad = {
      ...topic('bad'),
      url: undefined,
      status: undefined,
      experimental: 'yes',
      resourceTrigger: [{ supportedInteraction: 'create', queryCriteria: { requireBoth: 'true' }, foo: 1 }],
      canFilterBy: [{ resource: 'Encounter' }],
    };
    const res = await postResource(ctx.t, ctx.token, bad);
    expect(res.statusCode).toBe(400);
    const expressions = (res.json().issue as { expression: string[] }[]).flatMap((i) => i.expression);
    expect(expressions).toEqual(
      expect.arrayContaining([
        'SubscriptionTopic.url',
        'SubscriptionTopic.status',
        'SubscriptionTopic.experimental',
        'SubscriptionTopic.resourceTrigger[0].resource',
        'SubscriptionTopic.resourceTrigger[0].supportedInteraction',
        'SubscriptionTopic.resourceTrigger[0].queryCriteria.requireBoth',
        'SubscriptionTopic.resourceTrigger[0].foo',
        'SubscriptionTopic.canFilterBy[0].filterParameter',
      ]),
    );
  });
});
