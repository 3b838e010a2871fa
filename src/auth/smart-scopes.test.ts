// SMART system scopes: what is granted for what is asked, and what a token's scope claim permits (fhir/access.ts).
import { describe, expect, it } from 'vitest';
import { canRead, canWrite, type Actor } from '../fhir/access.js';
import { grantClientScope, parseSystemScope, resourceScopesOf } from './smart-scopes.js';

const member: Actor = { projectId: 'p', projectAdmin: false, superAdmin: false };
const admin: Actor = { ...member, projectAdmin: true };

describe('parseSystemScope', () => {
  it.each([
    ['system/Patient.rs', { type: 'Patient', permissions: 'rs', v1: false }],
    ['system/*.read', { type: '*', permissions: 'rs', v1: true }],
    ['system/*.write', { type: '*', permissions: 'cud', v1: true }],
    ['system/Observation.*', { type: 'Observation', permissions: 'cruds', v1: true }],
    ['system/*.cruds', { type: '*', permissions: 'cruds', v1: false }],
    ['system/Basic.c', { type: 'Basic', permissions: 'c', v1: false }],
  ])('%s', (text, parsed) => expect(parseSystemScope(text)).toEqual(parsed));

  it.each([
    'system/Patient.',
    'system/Patient.sr', // letters out of order
    'system/Patient.rr',
    'system/Nope.rs',
    'patient/*.read',
    'user/Patient.rs',
    'system/Observation.rs?category=laboratory',
    'openid',
  ])('%s is not supported', (text) => expect(parseSystemScope(text)).toBeUndefined());
});

describe('grantClientScope', () => {
  it.each([
    [member, undefined, 'openid'],
    [member, '', 'openid'],
    [member, 'openid offline_access', 'openid'],
    [member, 'profile launch', 'openid'],
    [member, 'system/*.read', 'system/*.read'],
    [member, 'system/Patient.rs system/Patient.rs openid', 'system/Patient.rs openid'],
    [member, 'system/ClientApplication.rs system/Patient.cruds', 'system/Patient.cruds'],
    [admin, 'system/ClientApplication.*', 'system/ClientApplication.*'],
    [admin, 'system/Project.*', 'system/Project.read'],
    [admin, 'system/Project.cruds', 'system/Project.rs'],
  ])('%o asking %s gets %s', (actor, asked, granted) => expect(grantClientScope(actor, asked)).toBe(granted));

  it.each(['system/ClientApplication.rs', 'patient/*.read', 'openid system/Nope.rs'])(
    '%s → invalid_scope',
    (asked) => expect(() => grantClientScope(member, asked)).toThrow(/None of the requested scopes/),
  );
});

describe('resourceScopesOf and access.ts', () => {
  it('leaves tokens without resource scopes unlimited', () => {
    expect(resourceScopesOf('openid')).toBeUndefined();
    expect(resourceScopesOf('openid profile offline_access')).toBeUndefined();
    expect(resourceScopesOf(undefined)).toBeUndefined();
  });

  it('never widens a token with an unsupported resource scope', () => {
    expect(resourceScopesOf('patient/Observation.rs?category=laboratory')).toEqual([]);
    const actor = { ...member, scopes: resourceScopesOf('patient/Observation.rs?category=laboratory') };
    expect(canRead(actor, 'Observation')).toBe(false);
  });

  it('limits user and patient scopes by type and interaction', () => {
    expect(resourceScopesOf('openid user/*.rs')).toEqual([{ type: '*', permissions: 'rs' }]);
    expect(resourceScopesOf('patient/*.read')).toEqual([{ type: '*', permissions: 'rs', patient: true }]);
    const actor = { ...member, patient: 'p1', scopes: resourceScopesOf('patient/Observation.rs') };
    expect(canRead(actor, 'Observation')).toBe(true);
    expect(canRead(actor, 'Practitioner')).toBe(false);
    expect(canWrite({ ...member, scopes: resourceScopesOf('user/*.rs') }, 'Patient', 'create')).toBe(false);
  });

  // Scope × interaction → allowed; the role rules still apply on top (a member never reads ClientApplications).
  it.each([
    [
      'system/Patient.rs',
      'Patient',
      { read: true, search: true, create: false, update: false, delete: false },
    ],
    [
      'system/Patient.rs',
      'Observation',
      { read: false, search: false, create: false, update: false, delete: false },
    ],
    [
      'system/*.read',
      'Observation',
      { read: true, search: true, create: false, update: false, delete: false },
    ],
    [
      'system/*.write',
      'Observation',
      { read: false, search: false, create: true, update: true, delete: true },
    ],
    ['system/Basic.cd', 'Basic', { read: false, search: false, create: true, update: false, delete: true }],
    [
      'system/*.*',
      'ClientApplication',
      { read: false, search: false, create: false, update: false, delete: false },
    ],
  ])('%s on %s', (claim, type, expected) => {
    const actor: Actor = { ...member, scopes: resourceScopesOf(claim) ?? [] };
    expect({
      read: canRead(actor, type, 'read'),
      search: canRead(actor, type, 'search'),
      create: canWrite(actor, type, 'create'),
      update: canWrite(actor, type, 'update'),
      delete: canWrite(actor, type, 'delete'),
    }).toEqual(expected);
  });
});
