// The Audit page's logic (API.md §10): the AuditEvent search its filters make (local days as UTC instants), and the
// rows it reads from BALP-shaped AuditEvents: a read, a search, a failed request, sign-ins that worked and failed.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  NO_FILTERS,
  auditQuery,
  auditRow,
  dayStart,
  decodeBase64,
  filtersProblem,
  newestFirst,
  type AuditEvent,
} from './audit.js';

const DCM = 'http://dicom.nema.org/resources/ontology/DCM';
const SOURCE = { coding: [{ system: DCM, code: '110153', display: 'Source Role ID' }] };
const DESTINATION = { coding: [{ system: DCM, code: '110152', display: 'Destination Role ID' }] };
const REST = {
  system: 'http://terminology.hl7.org/CodeSystem/audit-event-type',
  code: 'rest',
  display: 'Restful Operation',
};
const interaction = (code: string) => [
  { system: 'http://hl7.org/fhir/restful-interaction', code, display: code },
];
const entityType = (code: string) => ({
  system: 'http://terminology.hl7.org/CodeSystem/audit-entity-type',
  code,
});
const role = (code: string) => ({ system: 'http://terminology.hl7.org/CodeSystem/object-role', code });
const server = { type: DESTINATION, who: { display: 'http://localhost:8103/fhir/R4' }, requestor: false };

const read: AuditEvent = {
  resourceType: 'AuditEvent',
  id: 'e1',
  type: REST,
  subtype: interaction('read'),
  action: 'R',
  recorded: '2026-11-27T22:00:00.000Z',
  outcome: '0',
  agent: [
    server,
    {
      type: SOURCE,
      who: { reference: 'Practitioner/p1', display: 'Alice Smith' },
      altId: 'ProjectMembership/m1',
      requestor: true,
      network: { address: '127.0.0.1' },
    },
  ],
  entity: [
    { what: { reference: 'Observation/o1/_history/2' }, type: entityType('2'), role: role('4') },
    { what: { reference: 'Patient/pat1' }, type: entityType('1'), role: role('1') },
  ],
};

describe('auditQuery', () => {
  // Node reads TZ again when it changes: the days below are Paris days whatever the machine's zone.
  beforeAll(() => vi.stubEnv('TZ', 'Europe/Paris'));
  afterAll(() => vi.unstubAllEnvs());

  it('asks only for a page when nothing is filtered', () => {
    expect(auditQuery(NO_FILTERS, 50)).toBe('_count=50');
  });

  it('turns local days into UTC instants: from its start, to the start of the day after "to"', () => {
    expect(dayStart('2026-11-27')).toBe('2026-11-26T23:00:00Z');
    expect(dayStart('2026-11-27', 1)).toBe('2026-11-27T23:00:00Z');
    // Summer time: Paris is UTC+2, and a month's last day rolls over.
    expect(dayStart('2026-07-31', 1)).toBe('2026-07-31T22:00:00Z');
    expect(dayStart('27/11/2026')).toBeUndefined();
    expect(dayStart('')).toBeUndefined();
    const q = new URLSearchParams(auditQuery({ ...NO_FILTERS, from: '2026-11-01', to: '2026-11-27' }, 20));
    expect(q.getAll('date')).toEqual(['ge2026-10-31T23:00:00Z', 'lt2026-11-27T23:00:00Z']);
    expect(q.get('_count')).toBe('20');
  });

  it('sends agent and patient as typed, trimmed and encoded', () => {
    const q = auditQuery({ from: '', to: '', agent: ' Practitioner/p1 ', patient: 'pat 1' }, 50);
    expect(q).toBe('agent=Practitioner%2Fp1&patient=pat+1&_count=50');
    expect(new URLSearchParams(q).get('patient')).toBe('pat 1');
  });

  it('names a "to" day before the "from" day', () => {
    expect(filtersProblem({ ...NO_FILTERS, from: '2026-11-27', to: '2026-11-26' })).toMatch(/before/);
    expect(filtersProblem({ ...NO_FILTERS, from: '2026-11-27', to: '2026-11-27' })).toBeUndefined();
    expect(filtersProblem({ ...NO_FILTERS, to: '2026-11-26' })).toBeUndefined();
  });
});

describe('auditRow', () => {
  it('reads who read which resource version about which patient', () => {
    expect(auditRow(read)).toEqual({
      id: 'e1',
      recorded: '2026-11-27T22:00:00.000Z',
      who: 'Alice Smith',
      whoDetail: 'Practitioner/p1',
      what: 'read',
      action: 'Read',
      resources: ['Observation/o1/_history/2'],
      patients: ['Patient/pat1'],
      outcome: 'success',
      outcomeText: 'Success',
      address: '127.0.0.1',
    });
  });

  it("reads a search's query and its patients, and a requester known by reference only", () => {
    const query = btoa('Observation?patient=Patient/pat1&code=8867-4');
    const row = auditRow({
      ...read,
      id: 'e2',
      subtype: interaction('search'),
      action: 'E',
      agent: [{ type: SOURCE, who: { reference: 'ClientApplication/c1' }, requestor: true }, server],
      entity: [
        { type: entityType('2'), role: role('24'), query },
        { what: { reference: 'Patient/pat1' }, type: entityType('1'), role: role('1') },
        { what: { reference: 'Patient/pat2/_history/4' }, type: entityType('1'), role: role('1') },
        { what: { reference: 'Patient/pat1' }, type: entityType('1'), role: role('1') },
      ],
    });
    expect(row.who).toBe('ClientApplication/c1');
    expect(row.whoDetail).toBeUndefined();
    expect(row.what).toBe('search');
    expect(row.action).toBe('Execute');
    expect(row.query).toBe('Observation?patient=Patient/pat1&code=8867-4');
    expect(row.resources).toEqual([]);
    expect(row.patients).toEqual(['Patient/pat1', 'Patient/pat2']);
  });

  it('reads failures in words, with their description', () => {
    const client = auditRow({ ...read, outcome: '4', outcomeDesc: 'Patient/nope not found' });
    expect([client.outcome, client.outcomeText, client.outcomeDesc]).toEqual([
      'client-error',
      'Client error (4xx)',
      'Patient/nope not found',
    ]);
    const serverError = auditRow({ ...read, outcome: '8' });
    expect([serverError.outcome, serverError.outcomeText]).toEqual(['server-error', 'Server error (5xx)']);
    expect(auditRow({ ...read, outcome: '12' }).outcomeText).toBe('Major failure');
    const none: AuditEvent = { ...read };
    delete none.outcome;
    expect(auditRow(none)).toMatchObject({ outcome: 'unknown', outcomeText: 'Not recorded' });
  });

  it('reads sign-ins: a failed one names the user name tried, a sign-out its user', () => {
    const login = {
      type: { system: DCM, code: '110114', display: 'User Authentication' },
      action: 'E',
      entity: [],
    };
    const failed = auditRow({
      ...read,
      ...login,
      subtype: [{ system: DCM, code: '110122', display: 'Login' }],
      outcome: '4',
      outcomeDesc: 'Invalid email or password',
      agent: [{ type: SOURCE, who: { identifier: { value: 'mallory@example.com' } }, requestor: true }],
    });
    expect(failed).toMatchObject({
      who: 'mallory@example.com',
      whoDetail: 'tried mallory@example.com',
      what: 'Sign-in',
      outcome: 'client-error',
      outcomeDesc: 'Invalid email or password',
      resources: [],
      patients: [],
    });
    const logout = auditRow({
      ...read,
      ...login,
      subtype: [{ system: DCM, code: '110123', display: 'Logout' }],
    });
    expect([logout.who, logout.what]).toEqual(['Alice Smith', 'Sign-out']);
    const bare = auditRow({ resourceType: 'AuditEvent', type: login.type });
    expect([bare.id, bare.who, bare.what, bare.resources, bare.patients]).toEqual([
      '',
      'Unknown',
      'Authentication',
      [],
      [],
    ]);
  });
});

describe('decodeBase64 and newestFirst', () => {
  it('decodes UTF-8 text and refuses what is not base64', () => {
    expect(decodeBase64(btoa(String.fromCharCode(...new TextEncoder().encode('name=Zoë'))))).toBe('name=Zoë');
    expect(decodeBase64('not base64 at all!')).toBeUndefined();
  });

  it('orders by instant whatever the offset, undated rows last', () => {
    const rows = [
      auditRow({ ...read, id: 'a', recorded: '2026-11-27T22:00:00Z' }),
      auditRow({ ...read, id: 'b', recorded: '2026-11-27T23:00:00+02:00' }),
      auditRow({ ...read, id: 'c', recorded: undefined }),
      auditRow({ ...read, id: 'd', recorded: '2026-11-27T22:00:01Z' }),
    ];
    expect(newestFirst(rows).map((r) => r.id)).toEqual(['d', 'a', 'b', 'c']);
  });
});
