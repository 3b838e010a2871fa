// NDJSON pages are written as UTF-8 bytes: one line per resource, each ending in a newline, characters of any width
// intact; with `_elements`, each line cut down, and a page whose every resource fails is empty.
import { describe, expect, it } from 'vitest';
import type { FhirpathPool } from '../../fhir/csv/fhirpath-pool.js';
import type { OperationOutcome } from '../../fhir/outcome.js';
import type { ExportParams } from './export.js';
import { fileFormat } from './export-format.js';

const params = (extra: Partial<ExportParams> = {}): ExportParams => ({
  level: 'system',
  types: ['Patient'],
  since: null,
  projectId: null,
  ...extra,
});
const noPool = (): FhirpathPool => {
  throw new Error('NDJSON needs no FHIRPath');
};
const rows = [
  { rid: 1, json: '{"resourceType":"Patient","id":"a","name":[{"family":"Ñúñez 😀"}],"gender":"female"}' },
  { rid: 2, json: '{"resourceType":"Patient","id":"b","gender":"male"}' },
];

describe('NDJSON file format', () => {
  it('writes each stored resource as one UTF-8 line', async () => {
    const format = await fileFormat(params(), noPool);
    const bytes = await format.text('Patient', rows, () => undefined);
    expect(Buffer.isBuffer(bytes)).toBe(true);
    expect(bytes.toString('utf8')).toBe(`${rows[0]!.json}\n${rows[1]!.json}\n`);
    expect((await format.text('Patient', [], () => undefined)).length).toBe(0);
  });

  it('cuts lines down to `_elements`, and reports a resource it cannot write', async () => {
    const format = await fileFormat(params({ elements: { all: ['name'], byType: {} } }), noPool);
    const failed: OperationOutcome[] = [];
    const text = (await format.text('Patient', rows, (o) => failed.push(o))).toString('utf8');
    const lines = text.split('\n');
    expect(lines.at(-1)).toBe('');
    expect(JSON.parse(lines[0]!)).toMatchObject({ id: 'a', name: [{ family: 'Ñúñez 😀' }] });
    expect(JSON.parse(lines[0]!).gender).toBeUndefined();
    const broken = await format.text('Patient', [{ rid: 3, json: '{not json' }], (o) => failed.push(o));
    expect(broken.length).toBe(0);
    expect(failed).toHaveLength(1);
    expect(failed[0]?.issue[0]?.diagnostics ?? JSON.stringify(failed[0])).toContain('rid 3');
  });
});
