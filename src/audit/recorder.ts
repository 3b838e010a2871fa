// What one request did, as the audit trail needs it (API.md §10): the HTTP layer makes one recorder per audited
// request (http/plugins/audit.ts); the repository tells it each version it writes (`wrote`) and stores the AuditEvent
// of those writes in the write's own transaction (`takeWrites`, fhir/repository/audit-writes.ts); what is left when
// the answer has gone (reads, failures, logins) becomes one AuditEvent stored by the writer in its next batch.
import { auditRow, type AuditFacts } from './balp.js';
import type { AuditAgent, AuditEntity, AuditKind, AuditRow } from './model.js';
import { patientsOfResource } from './patients.js';

/** One version a write stored. */
export interface WrittenVersion {
  resourceType: string;
  id: string;
  versionId: number;
  interaction: 'create' | 'update' | 'delete';
  /** The version's resource (the previous one's JSON text for a delete): the patients it is about. */
  resource: unknown;
}

export interface RecorderMark {
  written: number;
  stored: number;
  rows: number;
}

export interface RecorderEnv {
  newId: () => string;
  clock: () => Date;
  server: AuditFacts['server'];
}

/** What the recorder asks of the request when it builds an event (read lazily: the principal is set after it). */
export interface RequestFacts {
  kind(): AuditKind;
  projectId(): string;
  agent(): AuditAgent;
}

export class AuditRecorder {
  private readonly written: WrittenVersion[] = [];
  /** Versions whose AuditEvent is already stored (in their transaction). */
  private storedVersions = 0;
  readonly entities: AuditEntity[] = [];
  readonly patients = new Set<string>();
  /** A Provenance to store beside the request's writes (the `X-Provenance` header, API.md §10), without `target`. */
  provenance: Record<string, unknown> | undefined;

  constructor(
    private readonly env: RecorderEnv,
    readonly request: RequestFacts,
  ) {}

  /** Versions a write is storing (inside its transaction or statement). */
  wrote(versions: readonly WrittenVersion[]): void {
    this.written.push(...versions);
  }

  /** AuditEvents stored with their writes (mirrored to the log once the answer is sent). */
  readonly storedRows: AuditRow[] = [];

  /** A point to come back to when the transaction that follows rolls back. */
  mark(): RecorderMark {
    return { written: this.written.length, stored: this.storedVersions, rows: this.storedRows.length };
  }

  /** Forgets what was written (and stored) since `mark`: its transaction rolled back. */
  rollback(mark: RecorderMark): void {
    this.written.length = mark.written;
    this.storedVersions = mark.stored;
    this.storedRows.length = mark.rows;
  }

  /** Versions written whose AuditEvent is not stored yet. */
  pending(): readonly WrittenVersion[] {
    return this.written.slice(this.storedVersions);
  }

  /** Whether any write's AuditEvent was stored with the write. */
  get storedWithWrites(): boolean {
    return this.storedVersions > 0;
  }

  /**
   * The AuditEvent of the versions written since the last one, to be stored in the same transaction (or statement)
   * as they are; none when nothing was written. In a batch, each entry's write is its own interaction.
   */
  takeWrites(): AuditRow | undefined {
    const versions = this.pending();
    if (versions.length === 0) return undefined;
    this.storedVersions = this.written.length;
    const request = this.request.kind();
    const first = versions[0] as WrittenVersion;
    const kind: AuditKind = request === 'batch' ? first.interaction : request;
    const patients = new Set<string>();
    for (const v of versions)
      for (const p of patientsOfResource(v.resourceType, v.id, v.resource)) patients.add(p);
    const row = this.row({
      kind,
      status: 200,
      entities: versions.map((v) => ({
        reference: `${v.resourceType}/${v.id}`,
        version: String(v.versionId),
      })),
      patients: [...patients],
    });
    this.storedRows.push(row);
    return row;
  }

  /** The request's own AuditEvent, once answered with `status`. */
  finish(status: number, extra: { failure?: string; query?: string; description?: string }): AuditRow {
    const versions = this.pending();
    const entities = [
      ...this.entities,
      ...versions.map((v) => ({ reference: `${v.resourceType}/${v.id}`, version: String(v.versionId) })),
    ];
    const patients = new Set(this.patients);
    for (const v of versions)
      for (const p of patientsOfResource(v.resourceType, v.id, v.resource)) patients.add(p);
    return this.row({
      kind: this.request.kind(),
      status,
      entities,
      patients: [...patients],
      failure: extra.failure,
      query: extra.query,
      description: extra.description,
    });
  }

  // Every property named, no spread: `{ ...f, id, … }` made V8 copy `f` property by property into a slow object (a
  // third of a read's audit time, and auditRow's reads of it slower too).
  private row(
    f: Pick<AuditFacts, 'kind' | 'status' | 'entities' | 'patients' | 'failure' | 'query' | 'description'>,
  ): AuditRow {
    return auditRow({
      id: this.env.newId(),
      kind: f.kind,
      projectId: this.request.projectId(),
      recorded: this.env.clock(),
      status: f.status,
      failure: f.failure,
      agent: this.request.agent(),
      entities: f.entities,
      patients: f.patients,
      query: f.query,
      description: f.description,
      server: this.env.server,
    });
  }
}
