// Every JSON example of the R4 specification (hl7.fhir.r4.examples) goes JSON → XML → JSON unchanged: the same
// content, decimals with the same text (https://hl7.org/fhir/R4/xml.html).
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseJson } from '../json/parse.js';
import { numberText } from '../json/raw-numbers.js';
import { stringifyJson } from '../json/stringify.js';
import { fromXml, toXml } from './index.js';

const dir = path.resolve('node_modules/hl7.fhir.r4.examples');
// Round-tripping all 191 MB of examples takes a minute of CPU, most of it the ~90 files over 200 KB (the aggregate
// Bundles of the specification's own definitions, 126 MB). A normal run takes every example under that size (5,100
// files); `CINDER_XML_EXAMPLES=all` takes every file (done for each change of the XML mapping).
const ALL = process.env.CINDER_XML_EXAMPLES === 'all';
const MAX_BYTES = 100_000;

/** JSON text with keys sorted and numbers as written: equal for equal content whatever the key order. */
function canonical(value: unknown, holder?: object, key?: string | number): string {
  if (typeof value === 'number') return (holder && numberText(holder, key as string)) ?? String(value);
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map((v, i) => canonical(v, value, i)).join(',')}]`;
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(obj[k], obj, k)}`).join(',')}}`;
}

describe('FHIR XML round trip of the R4 examples', () => {
  it(`JSON → XML → JSON gives back every example${ALL ? '' : ` under ${MAX_BYTES / 1000} KB`}`, () => {
    const files = fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.json') && f !== 'package.json' && !f.startsWith('.'))
      .filter((f) => ALL || fs.statSync(path.join(dir, f)).size < MAX_BYTES)
      .sort();
    expect(files.length).toBeGreaterThan(5000);
    const failed: string[] = [];
    let decimals = 0;
    for (const file of files) {
      const text = fs.readFileSync(path.join(dir, file), 'utf8');
      const json = parseJson(text) as Record<string, unknown>;
      let back: Record<string, unknown>;
      try {
        back = fromXml(toXml(json));
      } catch (err) {
        failed.push(`${file}: ${(err as Error).message}`);
        continue;
      }
      // Same text in the same key order (the usual case), or the same content in another key order.
      const written = stringifyJson(json);
      if (written !== stringifyJson(back) && canonical(json) !== canonical(back)) failed.push(file);
      if (/\d\.\d*0[,}\]]/.test(written)) decimals++;
    }
    expect(failed).toEqual([]);
    // The examples do exercise decimal texts that JS numbers lose (`1.50`, `2.0`).
    expect(decimals).toBeGreaterThan(10);
  }, 600_000);
});
