// Readers of Subscriptions (API.md §8) for the Subscriptions page: what a Subscription asks for (classic criteria or a
// topic, channel) and what its `$status` answers (https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/).
import type { Bundle, Resource } from './fhir.js';

const BACKPORT = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';
const FILTER_CRITERIA = `${BACKPORT}/backport-filter-criteria`;
const PAYLOAD_CONTENT = `${BACKPORT}/backport-payload-content`;
const CHANNEL_TYPE = `${BACKPORT}/backport-channel-type`;
/** Cinder's extensions on the `$status` Parameters: when a notification was last delivered, events not yet. */
export const LAST_DELIVERY = 'https://cinder.dev/fhir/StructureDefinition/subscription-last-delivery';
export const PENDING_EVENTS = 'https://cinder.dev/fhir/StructureDefinition/subscription-pending-events';

interface Extension {
  url?: string;
  [value: string]: unknown;
}
interface Element {
  extension?: Extension[];
}

export interface Subscription extends Resource {
  status?: string;
  reason?: string;
  criteria?: string;
  _criteria?: Element;
  error?: string;
  channel?: {
    type?: string;
    _type?: Element;
    endpoint?: string;
    payload?: string;
    _payload?: Element;
  };
}

/** What the page shows of a Subscription itself. */
export interface SubscriptionSummary {
  id: string;
  /** `topic` when `criteria` is a canonical URL (the Backport IG's form), else `classic` (a search). */
  form: 'classic' | 'topic';
  /** The search (classic) or the topic's canonical URL. */
  criteria: string;
  /** Topic form: the backport-filter-criteria values (`Type?param=value`). */
  filters: string[];
  channelType: string;
  endpoint: string;
  /** Topic form: empty | id-only | full-resource; classic: the payload MIME type, if any. */
  content: string;
  status: string;
  /** The Subscription's own `error` (R4: the latest error the server noted). */
  error: string;
}

const extensionsOf = (e: Element | undefined, url: string): Extension[] =>
  (e?.extension ?? []).filter((x) => x.url === url);

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

export function summarize(s: Subscription): SubscriptionSummary {
  const criteria = str(s.criteria);
  const custom = extensionsOf(s.channel?._type, CHANNEL_TYPE)[0]?.valueCoding as
    { code?: unknown } | undefined;
  const payloadContent = str(extensionsOf(s.channel?._payload, PAYLOAD_CONTENT)[0]?.valueCode);
  return {
    id: s.id ?? '',
    form: /^[a-z][a-z0-9+.-]*:/i.test(criteria) ? 'topic' : 'classic',
    criteria,
    filters: extensionsOf(s._criteria, FILTER_CRITERIA)
      .map((x) => str(x.valueString))
      .filter(Boolean),
    channelType: str(custom?.code) || str(s.channel?.type),
    endpoint: str(s.channel?.endpoint),
    content: payloadContent || str(s.channel?.payload),
    status: str(s.status),
    error: str(s.error),
  };
}

/** What `GET Subscription/<id>/$status` says (the IG's SubscriptionStatus Parameters and Cinder's extensions). */
export interface SubscriptionStatusInfo {
  /** `Subscription/<id>` as the status names it. */
  subscription: string;
  topic: string;
  status: string;
  type: string;
  /** events-since-subscription-start. */
  events?: number;
  /** The `error` entries' texts (text, else the first coding's display or code), in order. */
  errors: string[];
  lastDelivery?: string;
  pending?: number;
}

interface Parameter {
  name?: string;
  [value: string]: unknown;
}
interface Parameters extends Resource {
  parameter?: Parameter[];
  extension?: Extension[];
}

/** A count from any integer-like value[x]: integer, unsignedInt, integer64 (a JSON string), a numeric string. */
function count(holder: Record<string, unknown> | undefined): number | undefined {
  if (!holder) return undefined;
  for (const key of [
    'valueInteger',
    'valueUnsignedInt',
    'valuePositiveInt',
    'valueInteger64',
    'valueDecimal',
    'valueString',
  ]) {
    const v = holder[key];
    const n = typeof v === 'number' ? v : typeof v === 'string' && /^\s*\d+\s*$/.test(v) ? Number(v) : NaN;
    if (Number.isSafeInteger(n) && n >= 0) return n;
  }
  return undefined;
}

function errorText(p: Parameter): string {
  const cc = p.valueCodeableConcept as
    { text?: unknown; coding?: { display?: unknown; code?: unknown }[] } | undefined;
  return str(cc?.text) || str(cc?.coding?.[0]?.display) || str(cc?.coding?.[0]?.code) || str(p.valueString);
}

/** The Parameters about `id` in a `$status` answer: the answer itself, or (as the IG's R4 operation returns) an entry of
 * its searchset Bundle, the one naming `Subscription/<id>` or else the first. */
function statusParameters(body: unknown, id: string | undefined): Parameters | undefined {
  const r = body as Resource | null | undefined;
  if (r?.resourceType === 'Parameters') return r as Parameters;
  if (r?.resourceType !== 'Bundle') return undefined;
  const all = ((r as Bundle).entry ?? [])
    .map((e) => e.resource)
    .filter((x): x is Parameters => x?.resourceType === 'Parameters');
  const names = (p: Parameters): boolean => {
    const ref = p.parameter?.find((x) => x.name === 'subscription')?.valueReference as
      { reference?: unknown } | undefined;
    const path = str(ref?.reference).replace(/\/_history\/[^/]*$/, '');
    return id !== undefined && (path === `Subscription/${id}` || path.endsWith(`/Subscription/${id}`));
  };
  return all.find(names) ?? all[0];
}

/**
 * Reads a `$status` answer. `id`: the Subscription asked about (picks its entry when the answer is a Bundle).
 * Undefined when the answer holds no SubscriptionStatus Parameters.
 */
export function parseSubscriptionStatus(body: unknown, id?: string): SubscriptionStatusInfo | undefined {
  const p = statusParameters(body, id);
  if (!p) return undefined;
  const params = p.parameter ?? [];
  const one = (name: string): Parameter | undefined => params.find((x) => x.name === name);
  const value = (name: string): string => {
    const x = one(name);
    return x ? str(x.valueCode) || str(x.valueCanonical) || str(x.valueUri) || str(x.valueString) : '';
  };
  const ext = (url: string): Extension | undefined => (p.extension ?? []).find((x) => x.url === url);
  const events = count(one('events-since-subscription-start'));
  const pending = count(ext(PENDING_EVENTS));
  const lastDelivery = str(ext(LAST_DELIVERY)?.valueInstant) || str(ext(LAST_DELIVERY)?.valueDateTime);
  return {
    subscription: str(
      (one('subscription')?.valueReference as { reference?: unknown } | undefined)?.reference,
    ),
    topic: value('topic'),
    status: value('status'),
    type: value('type'),
    ...(events !== undefined ? { events } : {}),
    errors: params
      .filter((x) => x.name === 'error')
      .map(errorText)
      .filter(Boolean),
    ...(lastDelivery ? { lastDelivery } : {}),
    ...(pending !== undefined ? { pending } : {}),
  };
}
