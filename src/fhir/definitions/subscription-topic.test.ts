import { describe, expect, it } from 'vitest';
import { getSearchParam } from '../search/registry.js';
import { getElement, isResourceType, r4ResourceTypes, typeKind } from './index.js';
import { SUBSCRIPTION_TOPIC_SD, SUBSCRIPTION_TOPIC_SEARCH_PARAMETERS } from './subscription-topic.js';

describe("R5's SubscriptionTopic in R4", () => {
  it('uses only types that R4 defines', () => {
    const codes = new Set(
      SUBSCRIPTION_TOPIC_SD.snapshot.element.flatMap((e) => (e.type ?? []).map((t) => t.code)),
    );
    // FHIRPath system types (element ids) are mapped through their fhir-type extension.
    codes.delete('http://hl7.org/fhirpath/System.String');
    expect(codes.size).toBeGreaterThan(10);
    for (const code of codes) {
      expect(typeKind(code), code).toBeDefined();
    }
  });

  it('is a resource type beside the R4 ones, with its elements and search parameters', () => {
    expect(isResourceType('SubscriptionTopic')).toBe(true);
    expect(r4ResourceTypes()).not.toContain('SubscriptionTopic');
    expect(getElement('SubscriptionTopic.url')).toMatchObject({ min: 1, types: ['uri'] });
    expect(getElement('SubscriptionTopic.resourceTrigger.queryCriteria.resultForCreate')).toMatchObject({
      types: ['code'],
    });
    expect(getElement('SubscriptionTopic.canFilterBy.filterParameter')).toMatchObject({ min: 1 });
    expect(getElement('SubscriptionTopic.versionAlgorithm[x]')).toMatchObject({
      isChoice: true,
      types: ['string', 'Coding'],
    });
    const codes = SUBSCRIPTION_TOPIC_SEARCH_PARAMETERS.map((p) => p.code);
    for (const code of [
      'url',
      'status',
      'title',
      'version',
      'derived-or-self',
      'resource',
      'identifier',
      'date',
    ]) {
      expect(codes).toContain(code);
      expect(getSearchParam('SubscriptionTopic', code)?.expression, code).toMatch(/^SubscriptionTopic\./);
    }
    // Narrowed to SubscriptionTopic: the published CanonicalResource-url lists some 30 types.
    expect(getSearchParam('SubscriptionTopic', 'url')?.expression).toBe('SubscriptionTopic.url');
  });
});
