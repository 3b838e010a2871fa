// The official SQL on FHIR v2 conformance tests (https://github.com/FHIR/sql-on-fhir-v2/tree/master/tests, format in
// its tests.schema.json), read from the directory SOF_TESTS_DIR names: they are not part of Cinder. Get them with
//   git clone https://github.com/FHIR/sql-on-fhir-v2 && export SOF_TESTS_DIR=$PWD/sql-on-fhir-v2/tests
// Two runners use them: the engine's (src/fhir/views/sof-suite.test.ts) and the HTTP one through
// $viewdefinition-run (test/api/sof-suite-http.test.ts).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseJson } from '../../src/fhir/json/parse.js';

export type Row = Record<string, unknown>;

export interface SuiteTest {
  title: string;
  view: unknown;
  expect?: Row[];
  expectError?: boolean;
  expectColumns?: string[];
}

export interface SuiteFile {
  name: string;
  title: string;
  fhirVersion?: string[];
  resources: unknown[];
  tests: SuiteTest[];
}

export const SOF_TESTS_DIR = process.env.SOF_TESTS_DIR;

/** The suite's files (numbers parsed with their written text, as Cinder's JSON parser keeps it), by name. */
export function suiteFiles(dir: string | undefined = SOF_TESTS_DIR): SuiteFile[] {
  if (!dir) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json') && f !== 'tests.schema.json')
    .sort()
    .map((name) => ({
      name,
      ...(parseJson(readFileSync(join(dir, name), 'utf8')) as Omit<SuiteFile, 'name'>),
    }));
}

/** Cinder is an R4 server: a file that does not list 4.0.1 tests another FHIR version. */
export const isR4 = (file: SuiteFile): boolean =>
  file.fhirVersion === undefined || file.fhirVersion.includes('4.0.1');

/**
 * Rows in a canonical form: the suite fixes neither the order of rows (unionAll, cross joins) nor the order of keys in
 * an expected row (union.json "duplicates" lists `id` last); column order is checked by `expectColumns`.
 */
export const canonical = (rows: Row[]): string[] =>
  rows
    .map((r) => JSON.stringify(Object.fromEntries(Object.entries(r).sort(([a], [b]) => a.localeCompare(b)))))
    .sort();
