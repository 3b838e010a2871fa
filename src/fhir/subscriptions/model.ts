// The shapes the subscription modules share (API.md §8; classic R4 https://hl7.org/fhir/R4/subscription.html and the
// Subscriptions R5 Backport IG, STU 1.1, https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/).
import type { Resource } from '../types.js';

export type ContentLevel = 'empty' | 'id-only' | 'full-resource';
export type ChannelType = 'rest-hook' | 'websocket';
export type NotificationType =
  'handshake' | 'heartbeat' | 'event-notification' | 'query-status' | 'query-event';
/** What an outbox row is: an event of a change, or a notification that is not one (never numbered as an event). */
export type OutboxKind = 'event-notification' | 'handshake' | 'heartbeat' | 'test';
export type TriggerInteraction = 'create' | 'update' | 'delete';

export const BACKPORT = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';
export const EXT = {
  filterCriteria: `${BACKPORT}/backport-filter-criteria`,
  payloadContent: `${BACKPORT}/backport-payload-content`,
  heartbeatPeriod: `${BACKPORT}/backport-heartbeat-period`,
  timeout: `${BACKPORT}/backport-timeout`,
  maxCount: `${BACKPORT}/backport-max-count`,
  topicCanonical: `${BACKPORT}/backport-topic-canonical`,
  capabilityTopic:
    'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/capabilitystatement-subscriptiontopic-canonical',
} as const;

/**
 * The author whose read access bounds what a subscription may tell (API.md §8 "Access and safety"), recorded when the
 * Subscription is written: its membership (checked to be live at each event) and the token's scopes then.
 */
export interface SubscriptionAuthor {
  projectId: string;
  /** meta.author of the Subscription: `Practitioner/…`, `ClientApplication/…`. */
  reference?: string;
  membershipId?: string;
  projectAdmin: boolean;
  superAdmin: boolean;
  scopes?: readonly { type: string; permissions: string; patient?: boolean }[];
  patient?: string;
}

/** A search, compiled once, that a resource version can be matched against in memory (match-search.ts). */
export interface CompiledCriteria {
  resourceType: string;
  /** The query text it came from (without the type), for messages. */
  query: string;
  matches(resource: Resource): boolean;
}

/** One filter of a topic-based subscription (backport-filter-criteria: `Type?param=value`, one per extension). */
export interface TopicFilter {
  resourceType: string;
  criteria: CompiledCriteria;
}

/** A Subscription that is not `off`, parsed once from its stored version (registry.ts). */
export interface ActiveSubscription {
  id: string;
  projectId: string;
  versionId: number;
  status: 'requested' | 'active' | 'error';
  form: 'classic' | 'topic';
  channel: ChannelType;
  endpoint?: string;
  content: ContentLevel;
  /** Classic: its search's type; topic: the types its topic's triggers name. */
  resourceTypes: readonly string[];
  /** Classic: the compiled criteria. */
  criteria?: CompiledCriteria;
  /** Topic: the topic's canonical URL and filters. */
  topicUrl?: string;
  filters: readonly TopicFilter[];
  heartbeatPeriod?: number;
  timeout?: number;
  maxCount?: number;
  author: SubscriptionAuthor;
}

/** One change that a write makes, as the matcher sees it (previous: the version it replaces, if any). */
export interface WriteChange {
  interaction: TriggerInteraction;
  projectId: string;
  resourceType: string;
  id: string;
  versionId: number;
  current: Resource | null;
  previous: Resource | null;
}

/** One outbox row a matched change writes (subscription_events). */
export interface OutboxEvent {
  subscriptionId: string;
  projectId: string;
  kind: OutboxKind;
  focusType?: string;
  focusId?: string;
  focusVersion?: number;
  interaction?: TriggerInteraction;
}

/** An event as stored and numbered, when a notification is built from it. */
export interface NumberedEvent {
  eventNumber: number | null;
  kind: OutboxKind;
  focusType: string | null;
  focusId: string | null;
  focusVersion: number | null;
  /** The change that made the focus version (absent: not recorded). */
  interaction?: TriggerInteraction;
  createdAt: Date;
}
