// The body of a notification (API.md §8): for a classic subscription the matched version itself (or nothing), for a
// topic-based one the Backport IG's notification Bundle, with the focus versions its content level asks for.
import type { Queryable } from '../../storage/db.js';
import { parseJson } from '../json/parse.js';
import type { Resource } from '../types.js';
import { authorMayRead } from './matcher.js';
import type { ContentLevel, NotificationType, NumberedEvent, SubscriptionAuthor } from './model.js';
import { buildNotification, type SubscriptionStatusCode } from './notification.js';
import type { SubscriptionShape } from './subscription-resource.js';

/** The version an event names, as stored (null: deleted, gone by $expunge, or not the author's to read). */
export async function focusVersion(
  db: Queryable,
  author: SubscriptionAuthor,
  e: Pick<NumberedEvent, 'focusType' | 'focusId' | 'focusVersion'>,
): Promise<Resource | null> {
  if (!e.focusType || !e.focusId || e.focusVersion === null) return null;
  const r = await db.query<{ json: string | null }>(
    // A past version is in resource_history, the current one in resources (deleted: no content).
    `SELECT content::text AS json FROM resource_history
     WHERE rid = (SELECT rid FROM resources WHERE resource_type = $1 AND id = $2) AND version_id = $3
     UNION ALL
     SELECT content::text FROM resources WHERE resource_type = $1 AND id = $2 AND version_id = $3 AND NOT deleted`,
    [e.focusType, e.focusId, e.focusVersion],
    { prepare: true },
  );
  const json = r.rows[0]?.json;
  if (!json) return null;
  const resource = parseJson(json) as Resource;
  return authorMayRead(author, resource) ? resource : null;
}

export interface RenderInput {
  fhirBase: string;
  subscriptionId: string;
  shape: SubscriptionShape;
  status: string;
  eventsSinceStart: number;
  author: SubscriptionAuthor;
  type: NotificationType;
  events: readonly NumberedEvent[];
  content?: ContentLevel;
  errors?: string[];
}

/** A topic-based notification Bundle of `events` (none for a handshake or heartbeat). */
export async function renderBundle(db: Queryable, input: RenderInput): Promise<Resource> {
  const content = input.content ?? input.shape.content;
  const events = [];
  for (const e of input.events) {
    const resource = content === 'full-resource' ? await focusVersion(db, input.author, e) : undefined;
    events.push({
      eventNumber: e.eventNumber ?? 0,
      timestamp: e.createdAt,
      ...(e.focusType && e.focusId
        ? {
            focus: {
              type: e.focusType,
              id: e.focusId,
              versionId: e.focusVersion ?? 0,
              ...(e.interaction ? { interaction: e.interaction } : {}),
              ...(resource !== undefined ? { resource } : {}),
            },
          }
        : {}),
    });
  }
  return buildNotification({
    fhirBase: input.fhirBase,
    subscriptionId: input.subscriptionId,
    ...(input.shape.form === 'topic' ? { topicUrl: input.shape.criteria } : {}),
    status: input.status as SubscriptionStatusCode,
    type: input.type,
    eventsSinceStart: input.eventsSinceStart,
    content,
    events,
    ...(input.errors ? { errors: input.errors } : {}),
  });
}

/** A classic rest-hook's body: the matched version with a payload, else none. */
export async function renderClassic(
  db: Queryable,
  author: SubscriptionAuthor,
  shape: SubscriptionShape,
  e: NumberedEvent,
): Promise<string | undefined> {
  if (shape.content === 'empty' || e.kind !== 'event-notification') return undefined;
  const resource = await focusVersion(db, author, e);
  return resource ? JSON.stringify(resource) : undefined;
}
