// The body of a notification (API.md §8): for a classic subscription the matched version itself (or nothing), for a
// topic-based one the Backport IG's notification Bundle, with the focus versions its content level asks for.
import type { Queryable } from '../../storage/db.js';
import { parseJson } from '../json/parse.js';
import type { Resource } from '../types.js';
import { authorMayRead } from './matcher.js';
import type { ContentLevel, NotificationType, NumberedEvent, SubscriptionAuthor } from './model.js';
import { buildNotification, type SubscriptionStatusCode } from './notification.js';
import type { SubscriptionShape } from './subscription-resource.js';

type FocusKey = Pick<NumberedEvent, 'focusType' | 'focusId' | 'focusVersion'>;

/** The key of the version an event names in the map focusVersions answers; undefined when it names none. */
export const focusKey = (e: FocusKey): string | undefined =>
  e.focusType && e.focusId && e.focusVersion !== null
    ? `${e.focusType}/${e.focusId}/${e.focusVersion}`
    : undefined;

/**
 * The versions these events name, as stored, read with one statement however many events there are (a delivery
 * pass's batch, a websocket announcement's range): key → resource, or null when deleted, gone by $expunge, or not
 * the author's to read.
 */
export async function focusVersions(
  db: Queryable,
  author: SubscriptionAuthor,
  events: readonly FocusKey[],
): Promise<Map<string, Resource | null>> {
  const out = new Map<string, Resource | null>();
  const types: string[] = [];
  const ids: string[] = [];
  const versions: number[] = [];
  for (const e of events) {
    const key = focusKey(e);
    if (key === undefined || out.has(key)) continue;
    out.set(key, null);
    types.push(e.focusType as string);
    ids.push(e.focusId as string);
    versions.push(e.focusVersion as number);
  }
  if (types.length === 0) return out;
  const r = await db.query<{ t: string; id: string; v: number; json: string | null }>(
    // A past version is in resource_history, the current one in resources (deleted: no content).
    `SELECT x.t, x.id, x.v, coalesce(h.content::text,
       CASE WHEN r.version_id = x.v AND NOT r.deleted THEN r.content::text END) AS json
     FROM unnest($1::text[], $2::text[], $3::int[]) AS x(t, id, v)
     JOIN resources r ON r.resource_type = x.t AND r.id = x.id
     LEFT JOIN resource_history h ON h.rid = r.rid AND h.version_id = x.v`,
    [types, ids, versions],
  );
  for (const row of r.rows) {
    if (!row.json) continue;
    const resource = parseJson(row.json) as Resource;
    if (authorMayRead(author, resource)) out.set(`${row.t}/${row.id}/${row.v}`, resource);
  }
  return out;
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
  /** The focus versions, when the caller read them already (focusVersions); else they are read here. */
  versions?: ReadonlyMap<string, Resource | null>;
}

/** A topic-based notification Bundle of `events` (none for a handshake or heartbeat). */
export async function renderBundle(db: Queryable, input: RenderInput): Promise<Resource> {
  const content = input.content ?? input.shape.content;
  const versions =
    content === 'full-resource'
      ? (input.versions ?? (await focusVersions(db, input.author, input.events)))
      : undefined;
  const events = [];
  for (const e of input.events) {
    const key = focusKey(e);
    const resource = versions ? (key === undefined ? null : (versions.get(key) ?? null)) : undefined;
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

/** A classic rest-hook's body: the matched version with a payload, else none (`versions`: from focusVersions). */
export function renderClassic(
  shape: SubscriptionShape,
  e: NumberedEvent,
  versions: ReadonlyMap<string, Resource | null>,
): string | undefined {
  if (shape.content === 'empty' || e.kind !== 'event-notification') return undefined;
  const key = focusKey(e);
  const resource = key === undefined ? null : versions.get(key);
  return resource ? JSON.stringify(resource) : undefined;
}
