// AuditEvent rows stored directly with SQL (the tables of migration 018), unsealed, as the recorder stores them (the
// row, and its seq on the sealer's list audit_unsealed, in one statement): for tests of the chain, retention and
// $verify-chain that need rows without the requests that would record them.
import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../src/storage/db.js';
import { contentHash } from '../../src/audit/model.js';

/** Stores one unsealed AuditEvent row of `projectId`, recorded at `recorded`; returns its id. */
export async function insertEvent(db: Queryable, projectId: string, recorded = new Date()): Promise<string> {
  const id = randomUUID();
  const content = JSON.stringify({
    resourceType: 'AuditEvent',
    id,
    type: { system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest' },
    subtype: [{ system: 'http://hl7.org/fhir/restful-interaction', code: 'read' }],
    action: 'R',
    recorded: recorded.toISOString(),
    outcome: '0',
    agent: [{ who: { reference: 'Practitioner/p1' }, requestor: true }],
    source: { observer: { display: 'cinder' } },
    entity: [{ what: { reference: 'Patient/x1' } }],
  });
  await db.query(
    `WITH a AS (
       INSERT INTO audit_events (id, project_id, recorded, type, subtype, action, outcome, agents, entities, patients, content)
       VALUES ($1, $2::text, $3, $4, $5, 'R', '0', $6, $7, $8, $9) RETURNING seq
     )
     INSERT INTO audit_unsealed (seq, project_id, content_hash) SELECT seq, $2, $10 FROM a`,
    [
      id,
      projectId,
      recorded,
      'http://terminology.hl7.org/CodeSystem/audit-event-type|rest',
      ['http://hl7.org/fhir/restful-interaction|read'],
      ['Practitioner/p1'],
      ['Patient/x1'],
      ['Patient/x1'],
      content,
      contentHash(content),
    ],
  );
  return id;
}

export async function insertMany(
  db: Queryable,
  projectId: string,
  n: number,
  recorded?: Date,
): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push(await insertEvent(db, projectId, recorded));
  return ids;
}

/** Deletes the rows `ids` and their links in one statement, as retention does. */
export async function deleteSealed(db: Queryable, ids: readonly string[]): Promise<void> {
  await db.query(
    `WITH e AS (DELETE FROM audit_events WHERE id = ANY($1::text[]) RETURNING seq)
     DELETE FROM audit_chain WHERE seq IN (SELECT seq FROM e)`,
    [ids],
  );
}
