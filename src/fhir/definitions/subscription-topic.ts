// SubscriptionTopic as a Cinder resource type shaped as R5's (https://hl7.org/fhir/R5/subscriptiontopic.html), the
// topics of the Subscriptions R5 Backport IG (API.md §8). subscription-topic.r5.json beside this file is published
// data, not hand-typed: from HL7's npm package hl7.fhir.r5.core 5.0.0 (FHIR is CC0), StructureDefinition-
// SubscriptionTopic.json's snapshot with, per element, only path, min, max, type (code, targetProfile, the fhir-type
// and regex extensions), contentReference, isSummary and required bindings; and the SearchParameters whose base names
// SubscriptionTopic, with base and expression narrowed to SubscriptionTopic (the CanonicalResource ones list 30 types).
// Every type the snapshot uses is an R4 type (definitions.test.ts checks it), so R4's datatypes validate it.
import data from './subscription-topic.r5.json' with { type: 'json' };

export interface TopicSdElement {
  path: string;
  min?: number;
  max?: string;
  type?: { code: string; extension?: { url: string; valueUrl?: string; valueUri?: string }[] }[];
  contentReference?: string;
  isSummary?: boolean;
}

export interface TopicStructureDefinition {
  resourceType: 'StructureDefinition';
  url: string;
  name: string;
  type: string;
  kind: string;
  abstract: boolean;
  derivation: string;
  fhirVersion: string;
  snapshot: { element: TopicSdElement[] };
}

export interface TopicSearchParameter {
  url: string;
  code: string;
  type: 'string' | 'token' | 'uri' | 'date';
  base: string[];
  expression: string;
}

/** R5's SubscriptionTopic StructureDefinition (snapshot, slimmed). */
export const SUBSCRIPTION_TOPIC_SD = data.structureDefinition as unknown as TopicStructureDefinition;

/** R5's SearchParameters of SubscriptionTopic (url, status, title, version, derived-or-self, resource, ...). */
export const SUBSCRIPTION_TOPIC_SEARCH_PARAMETERS =
  data.searchParameters as unknown as readonly TopicSearchParameter[];
