// Every operation, and every writer, against deep, wide and malformed bodies (issue 25 point 1): whatever comes in,
// the answer is a 4xx with an OperationOutcome (never a 5xx), and the server still answers a read afterwards. The
// operations are those of the registry (src/fhir/operations/index.ts), at the paths the routes are derived from, so a
// new operation is fuzzed without touching this file. Generated cases are seeded (FUZZ_SEED picks another seed).
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_BODY_DEPTH } from '../../src/fhir/json/parse.js';
import { OPERATIONS } from '../../src/fhir/operations/index.js';
import { operationMethods, type OperationDefinition } from '../../src/fhir/operations/operation.js';
import { operationPaths } from '../../src/http/routes/operations.js';
import { testDatabases } from '../support/db.js';
import { created, useProjectApp } from '../support/app.js';

const SEED = Number(process.env.FUZZ_SEED ?? 20_250_125);

const DEEP = 5000;
const WIDE = 100_000;

const deepArrays = (inner = '1') => `${'['.repeat(DEEP)}${inner}${']'.repeat(DEEP)}`;
const deepObjects = (inner = '1') => `${'{"a":'.repeat(DEEP)}${inner}${'}'.repeat(DEEP)}`;
const deepResource = `{"resourceType":"Patient","extension":${'[{"url":"http://x","extension":'.repeat(DEEP / 2)}[]${'}]'.repeat(DEEP / 2)}}`;
const deepView = `{"resourceType":"ViewDefinition","resource":"Patient","select":${'[{"select":'.repeat(DEEP / 2)}[]${'}]'.repeat(DEEP / 2)}}`;
const param = (p: string) => `{"resourceType":"Parameters","parameter":[${p}]}`;
const entry = (resource: string) => `{"resource":${resource},"request":{"method":"POST","url":"Patient"}}`;

/** Bodies nested 5,000 levels, of arrays and of objects, at the root and inside Parameters and Bundles. */
const DEEP_BODIES: Record<string, string> = {
  'deep arrays': deepArrays(),
  'deep objects': deepObjects(),
  'deep object in arrays': deepArrays(deepObjects()),
  'deep resource': deepResource,
  'deep viewResource': param(`{"name":"viewResource","resource":${deepView}}`),
  'deep resource parameter': param(`{"name":"resource","resource":${deepResource}}`),
  'deep value': param(`{"name":"_type","valueString":${deepArrays('"Patient"')}}`),
  'deep parts': param(`${'{"name":"view","part":['.repeat(DEEP / 2)}{"name":"x"}${']}'.repeat(DEEP / 2)}`),
  'deep Bundle entry': `{"resourceType":"Bundle","type":"batch","entry":[${entry(deepResource)}]}`,
  'deep transaction entry': `{"resourceType":"Bundle","type":"transaction","entry":[${entry(deepArrays())}]}`,
};

const keys = (n: number) => Array.from({ length: n }, (_, i) => `"k${i}":${i}`).join(',');
const items = (n: number, item: string) => Array.from({ length: n }, () => item).join(',');

/** Bodies wide rather than deep (100,000 keys, long arrays), below the size that waits for a large-body slot. */
const WIDE_BODIES: Record<string, string> = {
  'wide object': `{${keys(WIDE)}}`,
  'wide Parameters of the wrong shape': `{"resourceType":"Parameters","parameter":"x",${keys(WIDE)}}`,
  'long parameter list of numbers': `{"resourceType":"Parameters","parameter":[${items(WIDE * 3, '1')}]}`,
  'many nameless parameters': `{"resourceType":"Parameters","parameter":[${items(WIDE / 2, '{"valueString":"x"}')}]}`,
  'viewResource a long array': param(`{"name":"viewResource","resource":[${items(WIDE, '{}')}]}`),
  'long Bundle entry list of nulls': `{"resourceType":"Bundle","type":"transaction","entry":[${items(WIDE / 2, 'null')}]}`,
};

/** A wide but well-formed resource, which some targets may accept (`$validate` lists an issue per key): no 5xx. */
const WIDE_LEGAL_BODIES: Record<string, string> = {
  'wide resource parameter': param(
    `{"name":"resource","resource":{"resourceType":"Patient",${keys(WIDE / 5)}}}`,
  ),
};

/** Text that is not JSON, and JSON of the wrong shape for every target. */
const MALFORMED_BODIES: Record<string, string> = {
  truncated: '{"resourceType":"Parameters","parameter":[{"name":"_type","valueString":"Pat',
  'open brace': '{',
  'close brace': '}',
  'trailing garbage': '{"resourceType":"Parameters"}}',
  'bad literal': 'nul',
  'leading zero': '{"a":01}',
  'single quotes': "{'resourceType':'Parameters'}",
  'control character': '{"a":"\u0001"}',
  'unbalanced deep': '['.repeat(DEEP),
  'array root': '[1,"x"]',
  'string root': '"Parameters"',
  'number root': '42',
  'null root': 'null',
  'true root': 'true',
  'empty object': '{}',
  'parameter a string': '{"resourceType":"Parameters","parameter":"x"}',
  'parameter an object': '{"resourceType":"Parameters","parameter":{"name":"resource"}}',
  'parameters of wrong types': param('null,1,"x",[],true'),
  'resource a string': param('{"name":"resource","resource":"Patient"}'),
  'resource an array': param('{"name":"resource","resource":[{"resourceType":"Patient"}]}'),
  'viewResource a string': param('{"name":"viewResource","resource":"ViewDefinition"}'),
  'viewResource a number': param('{"name":"viewResource","resource":5}'),
  'name an object': param('{"name":{"a":1},"valueString":["x"]}'),
  'part a string': param('{"name":"view","part":"x"}'),
  'part of wrong types': param('{"name":"view","part":[{"name":"viewResource","resource":[]}]}'),
  'Bundle entry a string': '{"resourceType":"Bundle","type":"transaction","entry":"x"}',
  'Bundle entries of wrong types':
    '{"resourceType":"Bundle","type":"transaction","entry":[null,1,{"resource":"x","request":5}]}',
  'resourceType a number': '{"resourceType":5}',
};

/** Well-formed JSON of odd content some targets may accept (an unknown parameter is ignored): never a 5xx. */
const ODD_BODIES: Record<string, string> = {
  'lone surrogate escape': param('{"name":"_type","valueString":"\\ud800"}'),
  'huge exponent': param('{"name":"_count","valueInteger":1e999999}'),
  'resource of wrong types': '{"resourceType":"Patient","id":5,"name":"x","extension":{"url":1}}',
  'batch entries of wrong types':
    '{"resourceType":"Bundle","type":"batch","entry":[null,1,{"resource":"x","request":5}]}',
  'empty Parameters': '{"resourceType":"Parameters"}',
};

type Json = Record<string, unknown>;

const isOutcome = (res: LightMyRequestResponse): boolean => {
  try {
    return (res.json() as Json).resourceType === 'OperationOutcome';
  } catch {
    return false;
  }
};

describe.each(testDatabases())(
  'operations fuzzed with deep, wide and malformed bodies on $name',
  (database) => {
    const ctx = useProjectApp(database);
    const ids: Record<string, string> = {};
    let patientId = '';

    beforeAll(async () => {
      const t = ctx.t;
      const patient = await created(t, ctx.token, { resourceType: 'Patient', name: [{ family: 'Fuzz' }] });
      patientId = patient.id as string;
      ids.Patient = patientId;
      ids.Group = (
        await created(t, ctx.token, {
          resourceType: 'Group',
          type: 'person',
          actual: true,
          member: [{ entity: { reference: `Patient/${patientId}` } }],
        })
      ).id as string;
      ids.ViewDefinition = (
        await created(t, ctx.token, {
          resourceType: 'ViewDefinition',
          resource: 'Patient',
          status: 'active',
          select: [{ column: [{ name: 'id', path: 'getResourceKey()' }] }],
        })
      ).id as string;
      ids.AsyncJob = randomUUID();
      ids.Project = randomUUID();
    });

    /** Where an operation is invoked: its Patient path when it has one (its first otherwise), with a real id. */
    const pathOf = (op: OperationDefinition): string => {
      const paths = operationPaths(op);
      const path = paths.find((p) => p.startsWith('/Patient/')) ?? (paths[0] as string);
      const type = /^\/([A-Za-z]+)\/:id\//.exec(path)?.[1] ?? 'Patient';
      return path.replace(':id', ids[type] ?? randomUUID());
    };

    type Target = {
      name: string;
      method: 'GET' | 'POST' | 'PUT' | 'PATCH';
      url: string;
      type?: string;
      op?: string;
    };

    /** The targets: every operation by each method it answers, and the writers. */
    const targets = (): Target[] => {
      const out: Target[] = [];
      for (const op of OPERATIONS) {
        const url = `${ctx.t.fhir}${pathOf(op)}`;
        for (const method of operationMethods(op))
          out.push({ name: `${op.level} $${op.code} ${method}`, method, url, op: op.code });
      }
      out.push(
        { name: 'create', method: 'POST', url: `${ctx.t.fhir}/Patient` },
        { name: 'update', method: 'PUT', url: `${ctx.t.fhir}/Patient/${patientId}` },
        { name: 'transaction/batch', method: 'POST', url: ctx.t.fhir },
        {
          name: 'patch',
          method: 'PATCH',
          url: `${ctx.t.fhir}/Patient/${patientId}`,
          type: 'application/json-patch+json',
        },
      );
      return out;
    };
    /** The targets that read a body. */
    const bodyTargets = (): Target[] => targets().filter((t) => t.method !== 'GET');

    /** A body goes with POST, PUT and PATCH; with GET, `query` carries the JSON text in the query string. */
    const send = (target: Target, payload: string, query = '') =>
      ctx.t.request({
        method: target.method,
        url: `${target.url}${query}`,
        token: ctx.token,
        headers: {
          'content-type': target.type ?? 'application/fhir+json',
          // Bulk Data kick-offs read their body only once these are given.
          prefer: 'respond-async',
          accept: 'application/fhir+json',
        },
        ...(target.method === 'GET' ? {} : { payload }),
      });

    /** What the server still reads after an answer: an empty string, or what went wrong. */
    const alive = async (): Promise<string> => {
      const res = await ctx.t.request({
        method: 'GET',
        url: `${ctx.t.fhir}/Patient/${patientId}`,
        token: ctx.token,
      });
      return res.statusCode === 200 ? '' : `then a read answered ${res.statusCode} ${res.body.slice(0, 200)}`;
    };

    /**
     * Why an answer is not a 4xx OperationOutcome, or '' when it is one. `$validate` answers 200 with an
     * OperationOutcome listing the errors of whatever resource it is given (R4 operation-resource-validate), which is
     * its refusal.
     */
    const clientError = (target: Target, res: LightMyRequestResponse): string => {
      if (res.statusCode >= 400 && res.statusCode < 500 && isOutcome(res)) return '';
      if (target.op === 'validate' && res.statusCode === 200 && isOutcome(res)) {
        const issues = (res.json() as { issue: { severity: string }[] }).issue;
        if (issues.some((i) => i.severity === 'error')) return '';
      }
      return `${res.statusCode} ${res.body.slice(0, 200)}`;
    };
    /** Why an answer is a 5xx, or a 4xx without an OperationOutcome; '' otherwise. */
    const noServerError = (_target: Target, res: LightMyRequestResponse): string =>
      res.statusCode < 400 || (res.statusCode < 500 && isOutcome(res))
        ? ''
        : `${res.statusCode} ${res.body.slice(0, 200)}`;

    /**
     * Sends every body to every target that reads one and lists each answer `judge` finds wrong, and each read that
     * then failed: all of them at once, so that one run shows the whole picture.
     */
    const fuzz = async (
      bodies: Record<string, string>,
      judge: (target: Target, res: LightMyRequestResponse) => string,
    ) => {
      const problems: string[] = [];
      for (const target of bodyTargets()) {
        for (const [bodyName, body] of Object.entries(bodies)) {
          const res = await send(target, body);
          const wrong = judge(target, res);
          const dead = await alive();
          if (wrong || dead) problems.push(`${target.name} with ${bodyName}: ${wrong} ${dead}`);
        }
      }
      expect(problems).toEqual([]);
    };

    it(`deep bodies (${DEEP} levels) answer 400 structure before anything walks them`, async () => {
      await fuzz(DEEP_BODIES, (_target, res) => {
        const issue = isOutcome(res)
          ? (res.json() as { issue: { code: string; details?: { text?: string } }[] }).issue[0]
          : undefined;
        const text = issue?.details?.text ?? '';
        return res.statusCode === 400 &&
          issue?.code === 'structure' &&
          text.includes(`deeper than ${MAX_BODY_DEPTH} levels`)
          ? ''
          : `${res.statusCode} ${res.body.slice(0, 200)}`;
      });
    });

    it('wide bodies (100,000 keys, long arrays) answer 4xx; a wide well-formed resource is no 5xx', async () => {
      await fuzz(WIDE_BODIES, clientError);
      await fuzz(WIDE_LEGAL_BODIES, noServerError);
    });

    it('malformed and mistyped bodies answer 4xx; odd but well-formed ones are no 5xx', async () => {
      await fuzz(MALFORMED_BODIES, clientError);
      await fuzz(ODD_BODIES, noServerError);
    });

    it('generated JSON in every parameter slot, by body and by query string, is no 5xx', async () => {
      const names = [
        'resource',
        'viewResource',
        'viewReference',
        'view',
        '_type',
        '_since',
        'patient',
        'mode',
        '_fields',
      ];
      const problems: string[] = [];
      const statuses = new Set<number>();
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(...targets()),
          fc.constantFrom(...names),
          fc.constantFrom('resource', 'valueString', 'valueReference', 'part', 'valueInteger'),
          fc.jsonValue({ maxDepth: 6 }),
          async (target, name, slot, value) => {
            const body = JSON.stringify({ resourceType: 'Parameters', parameter: [{ name, [slot]: value }] });
            const query = `?${name}=${encodeURIComponent(JSON.stringify(value))}`;
            const res = await send(target, body, target.method === 'GET' ? query : '');
            const wrong = noServerError(target, res);
            const dead = await alive();
            statuses.add(res.statusCode);
            if (wrong || dead) problems.push(`${target.name} with ${body.slice(0, 200)}: ${wrong} ${dead}`);
          },
        ),
        { numRuns: 150, seed: SEED },
      );
      expect(problems).toEqual([]);
      // The cases reached the operations: some were accepted, some refused.
      expect(
        [...statuses].some((c) => c < 300),
        [...statuses].join(),
      ).toBe(true);
      expect(
        [...statuses].some((c) => c >= 400),
        [...statuses].join(),
      ).toBe(true);
    });
  },
);
