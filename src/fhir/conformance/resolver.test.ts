// Canonical resolution (API.md §9): the caller's project first (the latest of its versions, or the one asked for), then
// the shared set; another project's resources are never seen. Unit test on the databases of test/support/db.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../../../test/support/db.js';
import { writePackageFolder } from '../../../test/support/fhir-package.js';
import type { Db } from '../../storage/db.js';
import { systemContext } from '../repository/context.js';
import { createResource } from '../repository/create.js';
import type { Resource } from '../types.js';
import { createResolver } from './resolver.js';
import { createSharedSet } from './shared-set.js';

const GENDER = 'http://hl7.org/fhir/ValueSet/administrative-gender';
const US_CORE_PATIENT = 'http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient';

describe.each(testDatabases())('canonical resolution on $name', ({ open }) => {
  let db: Db;
  const shared = createSharedSet({ packages: [writePackageFolder()] });
  const env = {
    clock: () => new Date(),
    newId: () => crypto.randomUUID(),
    fhirBase: 'http://localhost/fhir/R4',
  };
  const store = (project: string, r: Record<string, unknown>) =>
    createResource(db, systemContext(project, env), r as Resource);

  beforeAll(async () => {
    db = await open();
    await store('project-a', {
      resourceType: 'ValueSet',
      url: GENDER,
      version: '9.0.0',
      status: 'draft',
      name: 'A9',
    });
    await store('project-a', {
      resourceType: 'ValueSet',
      url: GENDER,
      version: '10.0.0',
      status: 'draft',
      name: 'A10',
    });
    await store('project-b', {
      resourceType: 'ValueSet',
      url: 'http://example.org/b-only',
      status: 'active',
      name: 'B',
    });
  });
  afterAll(async () => db?.close());

  it("resolves in the caller's project first, then in the shared set", async () => {
    const resolver = createResolver(db, shared);
    // The latest version: 10.0.0 after 9.0.0 (not text order).
    expect((await resolver.resolve({ projectId: 'project-a' }, 'ValueSet', GENDER))?.name).toBe('A10');
    expect((await resolver.resolve({ projectId: 'project-a' }, 'ValueSet', `${GENDER}|9.0.0`))?.name).toBe(
      'A9',
    );
    expect((await resolver.resolve({ projectId: 'project-a' }, 'ValueSet', `${GENDER}|4.0.1`))?.id).toBe(
      'administrative-gender',
    );
    expect((await resolver.resolve({ projectId: 'project-b' }, 'ValueSet', GENDER))?.id).toBe(
      'administrative-gender',
    );
    expect((await resolver.resolve({ projectId: null }, 'ValueSet', GENDER))?.id).toBe(
      'administrative-gender',
    );
  });

  it("never sees another project's resources", async () => {
    const resolver = createResolver(db, shared);
    expect(
      await resolver.resolve({ projectId: 'project-a' }, 'ValueSet', 'http://example.org/b-only'),
    ).toBeUndefined();
    expect(
      await resolver.resolve({ projectId: null }, 'ValueSet', 'http://example.org/b-only'),
    ).toBeUndefined();
    expect(
      (await resolver.resolve({ projectId: 'project-b' }, 'ValueSet', 'http://example.org/b-only'))?.name,
    ).toBe('B');
  });

  it('resolves package resources by url and url|version, and nothing of another type or version', async () => {
    const resolver = createResolver(db, shared);
    const at = { projectId: 'project-a' };
    expect((await resolver.resolve(at, 'StructureDefinition', US_CORE_PATIENT))?.id).toBe('us-core-patient');
    expect((await resolver.resolve(at, 'StructureDefinition', `${US_CORE_PATIENT}|5.0.1`))?.id).toBe(
      'us-core-patient',
    );
    expect(await resolver.resolve(at, 'StructureDefinition', `${US_CORE_PATIENT}|3.1.1`)).toBeUndefined();
    expect(await resolver.resolve(at, 'ValueSet', US_CORE_PATIENT)).toBeUndefined();
    expect(
      (await resolver.resolve(at, 'StructureDefinition', 'http://hl7.org/fhir/StructureDefinition/Patient'))
        ?.kind,
    ).toBe('resource');
  });
});
