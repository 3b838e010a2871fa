// The outbox of subscription events (API.md §8 "Delivery"): the rows a write inserts in its own statement or
// transaction, so that an event exists exactly when its change was committed.
import type { Resource } from '../types.js';
import type { OutboxEvent, TriggerInteraction, WriteChange } from './model.js';

/**
 * A CTE (for the write's own statement) that inserts `events`, its JSON parameter pushed onto `params`; undefined
 * when there are none, so a write that matches nothing has the statement it always had.
 */
export function outboxCte(events: readonly OutboxEvent[], params: unknown[]): string | undefined {
  if (events.length === 0) return undefined;
  params.push(
    JSON.stringify(
      events.map((e) => ({
        subscription_id: e.subscriptionId,
        project_id: e.projectId,
        kind: e.kind,
        focus_type: e.focusType ?? null,
        focus_id: e.focusId ?? null,
        focus_version: e.focusVersion ?? null,
        interaction: e.interaction ?? null,
      })),
    ),
  );
  return `outbox AS (
    INSERT INTO subscription_events (subscription_id, project_id, kind, focus_type, focus_id, focus_version, interaction)
    SELECT x.subscription_id, x.project_id, x.kind, x.focus_type, x.focus_id, x.focus_version, x.interaction
    FROM json_to_recordset($${params.length}::json)
      AS x(subscription_id text, project_id text, kind text, focus_type text, focus_id text, focus_version int, interaction text)
  )`;
}

/**
 * The change a stored version makes. `previousJson` (the version it replaces) is parsed only if a topic asks for it:
 * most writes match no subscription that looks at the previous version.
 */
export function writeChange(
  interaction: TriggerInteraction,
  projectId: string,
  resourceType: string,
  id: string,
  versionId: number,
  current: Resource | null,
  previousJson?: string | null,
): WriteChange {
  let previous: Resource | null | undefined = previousJson ? undefined : null;
  return {
    interaction,
    projectId,
    resourceType,
    id,
    versionId,
    current,
    get previous(): Resource | null {
      if (previous === undefined) previous = JSON.parse(previousJson as string) as Resource;
      return previous;
    },
  };
}
