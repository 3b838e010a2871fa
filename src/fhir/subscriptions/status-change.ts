// The server's own changes of a Subscription's status (API.md §8): `requested` → `active` after a successful handshake,
// → `error` (with `error` saying why) after persistent failure or when its author lost access. Written as a new version
// like any change, but not through a client's write rules (which would turn `active` back into `requested`).
import type { Db } from '../../storage/db.js';
import { parseJson } from '../json/parse.js';
import { selectCurrent, writeVersion } from '../repository/store.js';
import type { Resource } from '../types.js';

/**
 * Sets the status when the current one is among `from` (a client's concurrent change wins); returns the project id
 * when it changed anything.
 */
export async function setSubscriptionStatus(
  db: Db,
  id: string,
  from: readonly string[],
  status: 'active' | 'error',
  now: Date,
  error?: string,
): Promise<string | undefined> {
  return db.transaction(async (tx) => {
    const row = await selectCurrent(tx, 'Subscription', id, true);
    if (!row || row.deleted) return undefined;
    const current = parseJson(row.json) as Resource;
    if (!from.includes(current.status as string)) return undefined;
    const { error: _previous, ...rest } = current;
    const versionId = row.version_id + 1;
    const resource: Resource = {
      ...rest,
      status,
      ...(error !== undefined ? { error: error.slice(0, 1000) } : {}),
      meta: { ...current.meta, versionId: String(versionId), lastUpdated: now.toISOString() },
    };
    await writeVersion(tx, row.rid, 'Subscription', id, {
      resource,
      projectId: row.project_id,
      versionId,
      lastUpdated: now,
    });
    return row.project_id;
  });
}
