// HL7's FHIRPath Patch test cases (https://github.com/FHIR/fhir-test-cases, r4/patch/fhir-patch-tests.xml: input,
// diff Parameters, expected output or error), read from the file FHIRPATH_PATCH_TESTS names: they are not part of
// Cinder (.ci/run fetches them). Each case runs through the pure engine and through HTTP (create the input, PATCH
// with the diff, read back) on each database. https://hl7.org/fhir/R4/fhirpatch.html
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyFhirpathPatch } from '../../src/fhir/patch/fhirpath-patch.js';
import { FhirError } from '../../src/fhir/outcome.js';
import { fromXml } from '../../src/fhir/xml/index.js';
import { testDatabases } from '../support/db.js';
import { created, startTestApp, type TestApp } from '../support/app.js';

type Json = Record<string, unknown>;
const FILE = process.env.FHIRPATH_PATCH_TESTS;

interface Case {
  name: string;
  input: Json;
  diff: Json;
  output?: Json;
  error?: string;
}

const unescape = (s: string): string =>
  s
    .replace(/&apos;/g, "'")
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');

/** The cases of the file: each `<case>`'s input, diff and output documents (FHIR XML → JSON), or its error. */
function cases(file: string): Case[] {
  // XML end-of-line handling (https://www.w3.org/TR/xml/#sec-line-ends): the file has CRLF lines, which an XML
  // processor reads as LF; the "Full Resource" narrative would otherwise keep them.
  const text = readFileSync(file, 'utf8').replace(/\r\n?/g, '\n');
  return [...text.matchAll(/<case\s+name="([^"]*)"[^>]*>([\s\S]*?)<\/case>/g)].map((m) => {
    const body = m[2] as string;
    const doc = (tag: string): Json | undefined => {
      const inner = new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`).exec(body)?.[1];
      return inner === undefined ? undefined : fromXml(inner.trim());
    };
    const error = /<error\s+msg="([^"]*)"/.exec(body)?.[1];
    return {
      name: unescape(m[1] as string),
      input: doc('input') as Json,
      diff: doc('diff') as Json,
      ...(doc('output') ? { output: doc('output') } : {}),
      ...(error !== undefined ? { error: unescape(error) } : {}),
    };
  });
}

const suite = FILE ? cases(FILE) : [];

/**
 * A resource with its narrative's XHTML compared as character data: the XML converter keeps `&quot;` of an XHTML
 * text node as written, while the diff's valueString ("Full Resource") carries the character `"` itself; both are the
 * same XHTML (https://www.w3.org/TR/xml/#sec-predefined-ent).
 */
function sameXhtml(r: Json): Json {
  const text = r.text as { div?: unknown } | undefined;
  if (typeof text?.div !== 'string') return r;
  return { ...r, text: { ...text, div: text.div.replace(/&quot;/g, '"').replace(/&apos;/g, "'") } };
}

it('runs HL7 FHIRPath Patch test cases only when FHIRPATH_PATCH_TESTS names fhir-patch-tests.xml', () => {
  // Documents the switch: without the file (not part of Cinder) the suites below do not run.
  expect(FILE === undefined || suite.length > 0).toBe(true);
});

describe.runIf(FILE)('HL7 FHIRPath Patch test cases, pure engine', () => {
  for (const c of suite) {
    it(c.name, () => {
      const run = (): Json => applyFhirpathPatch(structuredClone(c.input), c.diff);
      if (c.error !== undefined) {
        expect(run).toThrow(FhirError);
        expect(run).toThrow(c.error);
        return;
      }
      expect(sameXhtml(run())).toEqual(sameXhtml(c.output as Json));
    });
  }
});

/** What the server adds or owns: compared without. */
function content(r: Json): Json {
  const { id: _id, meta: _meta, ...rest } = r;
  return rest;
}

describe.runIf(FILE).each(testDatabases())('HL7 FHIRPath Patch test cases over HTTP on $name', (database) => {
  let t: TestApp;
  let token: string;
  beforeAll(async () => {
    t = await startTestApp(database);
    token = (await t.newProject('FHIRPath Patch suite')).adminToken;
  });
  afterAll(async () => t?.close());

  for (const c of suite) {
    it(c.name, async () => {
      const made = await created(t, token, content(c.input));
      const url = `${t.fhir}/${String(made.resourceType)}/${String(made.id)}`;
      const res = await t.request({ method: 'PATCH', url, token, payload: c.diff });
      if (c.error !== undefined) {
        expect(res.statusCode).toBe(422);
        expect(JSON.stringify(res.json())).toContain(c.error.replace(/"/g, '\\"'));
        return;
      }
      expect(res.statusCode, res.body).toBe(200);
      const stored = (await t.request({ method: 'GET', url, token })).json() as Json;
      expect(sameXhtml(content(stored))).toEqual(sameXhtml(content(c.output as Json)));
    });
  }
});
