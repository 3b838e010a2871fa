// The $lastn index rows of an Observation (lastn-index.ts): one per subject, category key and code, text-only codes by
// their exact text, bounded for a hostile Observation.
import { describe, expect, it } from 'vitest';
import type { Resource } from '../types.js';
import { extractAll } from './extract.js';
import { lastnRows, TEXT_SYSTEM } from './lastn-index.js';

const rowsOf = (o: Record<string, unknown>) =>
  lastnRows(o, extractAll({ resourceType: 'Observation', ...o } as Resource));

describe('lastnRows', () => {
  it('keys each coding under no category, and under each category coding with and without its system', () => {
    const rows = rowsOf({
      resourceType: 'Observation',
      status: 'final',
      category: [{ coding: [{ system: 'http://cat', code: 'vital-signs' }] }],
      code: {
        coding: [
          { system: 'http://loinc.org', code: '8867-4' },
          { system: 'http://local', code: 'hr' },
        ],
      },
      subject: { reference: 'Patient/p1' },
      effectiveDateTime: '2024-01-01T10:00:00Z',
    });
    expect(rows.map((r) => `${r.subject} ${r.category} ${r.system}|${r.value}`).sort()).toEqual(
      [
        'Patient/p1  http://loinc.org|8867-4',
        'Patient/p1  http://local|hr',
        'Patient/p1 http://cat|vital-signs http://loinc.org|8867-4',
        'Patient/p1 http://cat|vital-signs http://local|hr',
        'Patient/p1 *|vital-signs http://loinc.org|8867-4',
        'Patient/p1 *|vital-signs http://local|hr',
      ].sort(),
    );
    // The latest instant of the effective time.
    expect(rows[0]?.effective).toBeGreaterThan(Date.parse('2024-01-01T10:00:00Z'));
    expect(rows[0]?.effective).toBeLessThanOrEqual(Date.parse('2024-01-01T10:00:01Z'));
  });

  it('groups a text-only code by its exact text, and an undated one sorts last', () => {
    const rows = rowsOf({
      resourceType: 'Observation',
      code: { text: 'Pain Score' },
      subject: { reference: 'Patient/p1' },
    });
    expect(rows).toEqual([
      { subject: 'Patient/p1', category: '', system: TEXT_SYSTEM, value: 'Pain Score', effective: -Infinity },
    ]);
  });

  it('has no rows without a subject or a code, or for another type', () => {
    expect(rowsOf({ resourceType: 'Observation', code: { text: 'x' } })).toEqual([]);
    expect(rowsOf({ resourceType: 'Observation', subject: { reference: 'Patient/p1' } })).toEqual([]);
    expect(lastnRows({ resourceType: 'Condition', code: { text: 'x' } }, [])).toEqual([]);
  });

  it('bounds the rows of an Observation with thousands of codings', () => {
    const coding = Array.from({ length: 5000 }, (_, i) => ({ system: 'http://x', code: `c${i}` }));
    const rows = rowsOf({
      resourceType: 'Observation',
      code: { coding },
      subject: { reference: 'Patient/p1' },
    });
    expect(rows.length).toBe(200);
  });
});
