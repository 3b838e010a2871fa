// Deep JSON inside operation parameters (issue 25 point 1): a `viewResource` nested 5,000 levels once made
// `$viewdefinition-run` answer 500 (the structured clone of `Worker.postMessage` overflowed its stack) and a second
// such request end the process from the FHIRPath pool's worker event handler. Every JSON a request carries is bounded
// when the body is parsed (src/fhir/json/parse.ts) and each resource inside Parameters at MAX_RESOURCE_DEPTH; a
// failure inside the worker pool fails only its own request.
import type { LightMyRequestResponse } from 'fastify';
import { Worker } from 'node:worker_threads';
import { describe, expect, it, vi } from 'vitest';
import { MAX_BODY_DEPTH } from '../../src/fhir/json/parse.js';
import { MAX_RESOURCE_DEPTH } from '../../src/fhir/validation/depth.js';
import { testDatabases } from '../support/db.js';
import { created, useProjectApp } from '../support/app.js';

type Json = Record<string, unknown>;

const outcome = (res: LightMyRequestResponse) => {
  const body = res.json() as { resourceType: string; issue: { code: string; details?: { text?: string } }[] };
  expect(body.resourceType, res.body).toBe('OperationOutcome');
  return { code: body.issue[0]?.code, text: body.issue[0]?.details?.text ?? '' };
};

/** A ViewDefinition whose `select` nests `levels` times (two JSON levels each), as text. */
const deepViewText = (levels: number): string =>
  `{"resourceType":"ViewDefinition","resource":"Patient","select":${'[{"select":'.repeat(levels)}[]${'}]'.repeat(levels)}}`;

/**
 * A ViewDefinition exactly `depth` levels of JSON objects and arrays deep (the view itself is level 1). Its selects
 * nest once (a view may nest them at most 10 deep); the depth comes from a chain of extensions on the view.
 */
function viewOfDepth(depth: number): Json {
  // view > select[] > select > column[] > column: 5 levels; a shallower view ends in an empty `tag` list.
  const column: Json = { name: 'id', path: 'getResourceKey()' };
  if (depth === 4) return { resourceType: 'ViewDefinition', resource: 'Patient', select: [{ column: [] }] };
  const view: Json = { resourceType: 'ViewDefinition', resource: 'Patient', select: [{ column: [column] }] };
  if (depth <= 5) return view;
  // view > extension[] (2) > extension (3) > extension[] (4) > ...: each extension object at an odd level; an even
  // depth ends in a CodeableConcept value one level below the last extension.
  const last = depth % 2 === 1 ? depth : depth - 1;
  let ext: Json =
    depth % 2 === 1
      ? { url: 'http://x', valueString: 'x' }
      : { url: 'http://x', valueCodeableConcept: { text: 'x' } };
  for (let level = last; level > 3; level -= 2) ext = { url: 'http://x', extension: [ext] };
  return { ...view, extension: [ext] };
}

describe.each(testDatabases())('deep operation parameters on $name', (database) => {
  const ctx = useProjectApp(database);

  const post = (url: string, payload: string) =>
    ctx.t.request({
      method: 'POST',
      url: `${ctx.t.fhir}/${url}`,
      token: ctx.token,
      headers: { 'content-type': 'application/fhir+json' },
      payload,
    });
  const alive = async () => {
    const res = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/Patient?_count=1`,
      token: ctx.token,
    });
    expect(res.statusCode, res.body).toBe(200);
  };

  it('answers 400 to a viewResource nested 5,000 levels, again and again, and the server goes on', async () => {
    const body = `{"resourceType":"Parameters","parameter":[{"name":"viewResource","resource":${deepViewText(2500)}}]}`;
    for (let i = 0; i < 4; i++) {
      const res = await post('$viewdefinition-run', body);
      expect(res.statusCode, res.body).toBe(400);
      const o = outcome(res);
      expect(o.code).toBe('structure');
      expect(o.text).toMatch(new RegExp(`deeper than ${MAX_BODY_DEPTH} levels`));
      await alive();
    }
    // The same requests at once.
    const all = await Promise.all([1, 2, 3].map(() => post('$viewdefinition-run', body)));
    expect(all.map((r) => r.statusCode)).toEqual([400, 400, 400]);
    await alive();
  });

  it(`runs a viewResource of ${MAX_RESOURCE_DEPTH} levels and refuses one of ${MAX_RESOURCE_DEPTH + 1} (viewResource, resource)`, async () => {
    const patient = await created(ctx.t, ctx.token, { resourceType: 'Patient' });
    const run = (view: Json, extra: Json[] = []) =>
      post(
        '$viewdefinition-run',
        JSON.stringify({
          resourceType: 'Parameters',
          parameter: [{ name: 'viewResource', resource: view }, ...extra],
        }),
      );
    const ok = await run(viewOfDepth(MAX_RESOURCE_DEPTH), [{ name: 'resource', resource: patient }]);
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.body).toContain(patient.id as string);
    const over = await run(viewOfDepth(MAX_RESOURCE_DEPTH + 1));
    expect(over.statusCode, over.body).toBe(400);
    expect(outcome(over).text).toMatch(new RegExp(`viewResource.*deeper than ${MAX_RESOURCE_DEPTH} levels`));
    // An inline resource nested more than a resource may, within the body's bound.
    let ext: Json = { url: 'http://x', valueString: 'x' };
    for (let i = 0; i < 70; i++) ext = { url: 'http://x', extension: [ext] };
    const deepPatient = { resourceType: 'Patient', id: 'deep', extension: [ext] };
    const res = await run(viewOfDepth(4), [{ name: 'resource', resource: deepPatient }]);
    expect(res.statusCode, res.body).toBe(400);
    expect(outcome(res).text).toMatch(new RegExp(`resource.*deeper than ${MAX_RESOURCE_DEPTH} levels`));
    await alive();
  });

  it('refuses a deep viewResource given in the query string or a form body', async () => {
    const view = encodeURIComponent(deepViewText(2500));
    const get = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/$viewdefinition-run?viewResource=${view}`,
      token: ctx.token,
    });
    // A query value is text, never a resource: the view must come in a Parameters body.
    expect(get.statusCode, get.body).toBe(400);
    expect(outcome(get).text).toBe('viewResource must hold a ViewDefinition resource');
    const form = await ctx.t.request({
      method: 'POST',
      url: `${ctx.t.fhir}/$viewdefinition-run`,
      token: ctx.token,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: `viewResource=${view}`,
    });
    expect(form.statusCode, form.body).toBe(400);
    expect(outcome(form).text).toBe('The request body must be a Parameters resource');
    await alive();
  });

  it('a request whose FHIRPath worker dies fails alone; the others are answered and the next runs', async () => {
    const patient = await created(ctx.t, ctx.token, { resourceType: 'Patient' });
    const run = (column: string) =>
      post(
        '$viewdefinition-run',
        JSON.stringify({
          resourceType: 'Parameters',
          parameter: [
            {
              name: 'viewResource',
              resource: {
                resourceType: 'ViewDefinition',
                resource: 'Patient',
                select: [{ column: [{ name: column, path: 'getResourceKey()' }] }],
              },
            },
            { name: 'resource', resource: patient },
          ],
        }),
      );
    // The worker that is sent the rows of the view with a column named `crash` is killed before it can answer.
    const send = Worker.prototype.postMessage;
    const spy = vi.spyOn(Worker.prototype, 'postMessage').mockImplementation(function (
      this: Worker,
      message: unknown,
    ) {
      const m = message as { kind?: string; view?: { select?: { column?: { name?: string }[] }[] } };
      if (m.kind === 'view-rows' && m.view?.select?.[0]?.column?.[0]?.name === 'crash')
        return void this.terminate();
      send.call(this, message);
    });
    try {
      const [crashed, ok] = await Promise.all([run('crash'), run('id')]);
      expect(crashed.statusCode, crashed.body).toBe(500);
      expect(outcome(crashed).code).toBe('exception');
      expect(ok.statusCode, ok.body).toBe(200);
      expect(ok.body).toContain(patient.id as string);
    } finally {
      spy.mockRestore();
    }
    const again = await run('crash');
    expect(again.statusCode, again.body).toBe(200);
    await alive();
  });
});
