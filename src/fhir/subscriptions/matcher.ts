// Which subscriptions a write's changes notify (API.md §8): by type first (a map lookup), then by the classic criteria
// on the new version (never on a delete, as R4 says) or by the topic's triggers on the previous and current versions
// and the subscription's filters; and only where the subscription's author may read the version.
import { canRead, patientReach, type Actor } from '../access.js';
import { versionInReach } from '../search/patient-reach.js';
import type { Queryable } from '../../storage/db.js';
import type { Resource } from '../types.js';
import type { OutboxEvent, SubscriptionAuthor, WriteChange } from './model.js';
import type { RegisteredSubscription, SubscriptionRegistry } from './registry.js';
import { filtersMatch } from './topic-filters.js';

/** The author's access as the one access module judges it (API.md §3: project, scopes, patient compartment). */
export function authorActor(author: SubscriptionAuthor): Actor {
  return {
    projectId: author.projectId,
    projectAdmin: author.projectAdmin,
    superAdmin: author.superAdmin,
    ...(author.scopes ? { scopes: author.scopes } : {}),
    ...(author.patient !== undefined ? { patient: author.patient } : {}),
    ...(author.membershipId !== undefined ? { membershipId: author.membershipId } : {}),
  };
}

/** Whether the author may read this version of a resource. */
export function authorMayRead(author: SubscriptionAuthor, resource: Resource): boolean {
  const actor = authorActor(author);
  if (!canRead(actor, resource.resourceType, 'read', resource.id)) return false;
  return versionInReach(patientReach(actor), resource);
}

function notifies(sub: RegisteredSubscription, change: WriteChange): boolean {
  if (sub.form === 'classic') {
    if (change.interaction === 'delete' || !change.current) return false;
    if (!sub.criteria?.matches(change.current)) return false;
  } else {
    if (!sub.triggers?.(change)) return false;
    const focus = change.current ?? change.previous;
    if (!focus || !filtersMatch(sub.filters, focus)) return false;
  }
  // What the notification would tell: the new version, or for a delete the version that was deleted.
  const told = change.current ?? change.previous;
  return told !== null && authorMayRead(sub.author, told);
}

/** The outbox rows of these changes (empty for the common write that no subscription concerns). */
export async function eventsFor(
  registry: SubscriptionRegistry,
  db: Queryable,
  changes: readonly WriteChange[],
): Promise<OutboxEvent[]> {
  const events: OutboxEvent[] = [];
  for (const change of changes) {
    const subs = await registry.candidates(db, change.projectId, change.resourceType);
    for (const sub of subs) {
      if (!notifies(sub, change)) continue;
      events.push({
        subscriptionId: sub.id,
        projectId: change.projectId,
        kind: 'event-notification',
        focusType: change.resourceType,
        focusId: change.id,
        focusVersion: change.versionId,
        interaction: change.interaction,
      });
    }
  }
  return events;
}
