// The AuditEvent of a request's writes, stored in their own transaction (API.md §10 "Nothing is lost"), and the
// Provenance its `X-Provenance` header asks for, whose `target` is every version the request wrote. `withAudit` gives
// the repository a Db whose transactions end by storing both, so no write path assembles them itself.
import type { Db, Queryable } from '../../storage/db.js';
import { insertAuditRows } from '../../audit/writer.js';
import type { Resource } from '../types.js';
import type { RepoContext } from './context.js';
import { commitCreates } from './create.js';
import { prepareWrite } from './prepare.js';

/** Stores the Provenance (if asked) and the AuditEvent of what the request wrote since the last one, in `tx`. */
export async function storeWriteAudit(tx: Queryable, ctx: RepoContext): Promise<void> {
  const rec = ctx.audit;
  if (!rec) return;
  const versions = rec.pending();
  if (versions.length === 0) return;
  if (rec.provenance) {
    const provenance = {
      ...rec.provenance,
      resourceType: 'Provenance',
      target: versions.map((v) => ({ reference: `${v.resourceType}/${v.id}/_history/${v.versionId}` })),
      recorded:
        typeof rec.provenance.recorded === 'string' ? rec.provenance.recorded : ctx.clock().toISOString(),
      ...(rec.provenance.agent === undefined && ctx.author
        ? { agent: [{ who: { reference: ctx.author } }] }
        : {}),
    } as Resource;
    delete provenance.id;
    await commitCreates(tx, ctx, [prepareWrite(ctx, provenance, ctx.newId(), 1, ctx.clock())]);
  }
  const row = rec.takeWrites();
  if (row) await insertAuditRows(tx, [row]);
}

/** `db` whose transactions store the request's write audit before they commit (`db` itself when not auditing). */
export function withAudit(db: Db, ctx: RepoContext): Db {
  const rec = ctx.audit;
  if (!rec) return db;
  return {
    kind: db.kind,
    query: (sql, params, opts) => db.query(sql, params, opts),
    session: (fn) => db.session(fn),
    exec: (sql) => db.exec(sql),
    close: () => db.close(),
    transaction: (fn) =>
      db.transaction(async (tx) => {
        // A retried transaction starts again from here.
        const mark = rec.mark();
        try {
          const out = await fn(tx);
          await storeWriteAudit(tx, ctx);
          return out;
        } catch (err) {
          rec.rollback(mark);
          throw err;
        }
      }),
  };
}
