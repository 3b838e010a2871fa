// Reading a stored Subscription (https://hl7.org/fhir/R4/subscription.html) in either of API.md §8's forms: classic
// (criteria is a search) or topic-based as the Backport IG says (criteria is a topic canonical, with extensions).
import { outboundTargetRefused, parseOutboundUrl } from '../../auth/outbound.js';
import { isResourceType } from '../definitions/index.js';
import { FhirError } from '../outcome.js';
import type { Resource } from '../types.js';
import { compileCriteria } from './match-search.js';
import { EXT, type ChannelType, type ContentLevel } from './model.js';

interface Extension {
  url?: unknown;
  [k: string]: unknown;
}

export interface SubscriptionShape {
  form: 'classic' | 'topic';
  status: string;
  criteria: string;
  channel: ChannelType;
  endpoint?: string;
  content: ContentLevel;
  /** Topic form: the filter texts of the `backport-filter-criteria` extensions (`Type?param=value` or `param=value`). */
  filters: string[];
  heartbeatPeriod?: number;
  timeout?: number;
  maxCount?: number;
}

const bad = (message: string, code: string, expression: string): FhirError =>
  new FhirError('invalid', message, code, { expression: [expression] });

const extensionsOf = (node: unknown): Extension[] => {
  const ext = (node as { extension?: unknown } | undefined)?.extension;
  return Array.isArray(ext) ? (ext as Extension[]) : [];
};

const extensionValue = (node: unknown, url: string): unknown => {
  const e = extensionsOf(node).find((x) => x.url === url);
  if (!e) return undefined;
  const key = Object.keys(e).find((k) => k.startsWith('value'));
  return key ? e[key] : undefined;
};

/** A classic criteria is `Type` or `Type?query`; anything else is a topic canonical (a URL). */
export function isClassicCriteria(criteria: string): boolean {
  const m = /^([A-Za-z]+)(\?|$)/.exec(criteria);
  return m !== null && isResourceType(m[1] as string);
}

function positive(value: unknown, element: string, code: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0)
    throw bad(`${element} must be a non-negative integer`, code, element);
  return value;
}

/** The parts of a Subscription the engine uses; a 400 naming the element for what it cannot serve. */
export function readSubscription(resource: Resource): SubscriptionShape {
  const criteria = typeof resource.criteria === 'string' ? resource.criteria : '';
  const channel = (resource.channel ?? {}) as Record<string, unknown>;
  const type = channel.type;
  if (type !== 'rest-hook' && type !== 'websocket') {
    throw bad(
      `Subscription.channel.type ${String(type)} is not supported; use rest-hook or websocket`,
      'subscription.channel-unsupported',
      'Subscription.channel.type',
    );
  }
  const endpoint = typeof channel.endpoint === 'string' ? channel.endpoint : undefined;
  const form = isClassicCriteria(criteria) ? 'classic' : 'topic';
  if (form === 'topic' && !/^[a-z][a-z0-9+.-]*:\S+$/i.test(criteria)) {
    throw bad(
      'Subscription.criteria must be a search (Type?query) or the canonical URL of a SubscriptionTopic',
      'subscription.criteria-form',
      'Subscription.criteria',
    );
  }
  const payload = typeof channel.payload === 'string' ? channel.payload : undefined;
  if (payload !== undefined && !/^application\/(fhir\+)?json$/.test(payload)) {
    throw bad(
      `Subscription.channel.payload ${payload} is not supported; use application/fhir+json`,
      'subscription.payload-type',
      'Subscription.channel.payload',
    );
  }
  let content: ContentLevel = payload === undefined ? 'empty' : 'full-resource';
  if (form === 'topic' && payload !== undefined) {
    const asked = extensionValue(channel._payload, EXT.payloadContent);
    if (asked !== undefined && asked !== 'empty' && asked !== 'id-only' && asked !== 'full-resource') {
      throw bad(
        'The backport-payload-content extension must be empty, id-only or full-resource',
        'subscription.payload-content',
        'Subscription.channel.payload',
      );
    }
    content = (asked as ContentLevel | undefined) ?? 'id-only';
  }
  const filters = extensionsOf(resource._criteria)
    .filter((e) => e.url === EXT.filterCriteria)
    .map((e) => e.valueString);
  if (filters.some((f) => typeof f !== 'string' || f.length === 0)) {
    throw bad(
      'Each backport-filter-criteria extension needs a valueString',
      'subscription.filter-form',
      'Subscription.criteria',
    );
  }
  if (form === 'classic' && filters.length > 0) {
    throw bad(
      'Filters (backport-filter-criteria) apply to topic-based subscriptions only',
      'subscription.filter-classic',
      'Subscription.criteria',
    );
  }
  const heartbeatPeriod = positive(
    extensionValue(channel, EXT.heartbeatPeriod),
    'Subscription.channel (backport-heartbeat-period)',
    'subscription.heartbeat',
  );
  const timeout = positive(
    extensionValue(channel, EXT.timeout),
    'Subscription.channel (backport-timeout)',
    'subscription.timeout',
  );
  const maxCount = positive(
    extensionValue(channel, EXT.maxCount),
    'Subscription.channel (backport-max-count)',
    'subscription.max-count',
  );
  // StructureDefinition-backport-max-count.html: a positiveInt (1 or more), at most one.
  if (
    maxCount === 0 ||
    (maxCount ?? 0) > 2_147_483_647 ||
    extensionsOf(channel).filter((e) => e.url === EXT.maxCount).length > 1
  ) {
    throw bad(
      'Subscription.channel (backport-max-count) must be one positive integer',
      'subscription.max-count',
      'Subscription.channel (backport-max-count)',
    );
  }
  return {
    form,
    status: typeof resource.status === 'string' ? resource.status : '',
    criteria,
    channel: type,
    ...(endpoint !== undefined ? { endpoint } : {}),
    content,
    filters: filters as string[],
    ...(heartbeatPeriod !== undefined ? { heartbeatPeriod } : {}),
    ...(timeout !== undefined ? { timeout } : {}),
    ...(maxCount !== undefined ? { maxCount } : {}),
  };
}

/**
 * What a client's write of a Subscription is stored as (API.md §8): a rest-hook needs an http(s) endpoint; a
 * subscription asked to be `requested` or `active` starts `active` at once (classic) or `requested` until its
 * handshake succeeds (topic form; a websocket has no handshake to wait for, so it is `active`).
 */
export function storedStatus(shape: SubscriptionShape): string {
  if (shape.status !== 'requested' && shape.status !== 'active') return shape.status;
  return shape.form === 'topic' && shape.channel === 'rest-hook' ? 'requested' : 'active';
}

/** The rest-hook endpoint's form and target (API.md §2's outbound rule), checked when the Subscription is saved. */
export async function assertEndpoint(
  shape: SubscriptionShape,
  allowedHosts: readonly string[],
): Promise<void> {
  if (shape.channel !== 'rest-hook') return;
  const element = 'Subscription.channel.endpoint';
  if (!shape.endpoint) throw bad(`${element} is required for a rest-hook`, 'subscription.endpoint', element);
  try {
    parseOutboundUrl(shape.endpoint);
  } catch {
    throw bad(`${element} must be an http or https URL`, 'subscription.endpoint', element);
  }
  if (await outboundTargetRefused(shape.endpoint, { allowedHosts })) {
    throw bad(
      `${element} names a loopback, private or link-local address; the server does not call it`,
      'subscription.endpoint-refused',
      element,
    );
  }
}

/** `channel.header` entries (`Name: value`), checked so that none can inject another header or line. */
export function parseHeaders(headers: unknown): [string, string][] {
  if (headers === undefined) return [];
  if (!Array.isArray(headers) || headers.length > 20)
    throw bad(
      'Subscription.channel.header must be at most 20 strings',
      'subscription.header',
      'Subscription.channel.header',
    );
  return headers.map((h: unknown) => {
    const m =
      typeof h === 'string'
        ? /^([!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}):[ \t]*([^\r\n\0]{0,4000})$/.exec(h)
        : null;
    if (!m) {
      throw bad(
        'Each Subscription.channel.header must be "Name: value" on one line',
        'subscription.header',
        'Subscription.channel.header',
      );
    }
    return [m[1] as string, (m[2] as string).trim()];
  });
}

/**
 * A client's Subscription as it is stored: its form readable, a classic criteria compiled (a 400 for what the
 * in-memory matcher cannot decide), and its status as storedStatus says.
 */
export function normaliseSubscription(resource: Resource): Resource {
  const shape = readSubscription(resource);
  if (shape.form === 'classic') compileCriteria(shape.criteria);
  const status = storedStatus(shape);
  return status === resource.status ? resource : { ...resource, status };
}
