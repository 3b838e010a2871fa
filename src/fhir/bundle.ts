// Builds Bundle JSON text around resources that are already JSON text (from storage), so that searches and
// histories never parse and re-serialise the resources they return. https://hl7.org/fhir/R4/bundle.html

export interface BundleEntryText {
  fullUrl?: string;
  /** The resource as JSON text, or absent (history entry of a delete). */
  resource?: string;
  search?: { mode: 'match' | 'include' | 'outcome' };
  request?: { method: string; url: string };
  response?: { status: string; location?: string; etag?: string; lastModified?: string; outcome?: unknown };
}

export interface BundleText {
  type: 'searchset' | 'history' | 'batch-response' | 'transaction-response';
  total?: number;
  link?: { relation: string; url: string }[];
  entry: BundleEntryText[];
  timestamp?: string;
}

export function bundleToJson(b: BundleText, id: string): string {
  const head: Record<string, unknown> = { resourceType: 'Bundle', id, type: b.type };
  if (b.timestamp) head.timestamp = b.timestamp;
  if (b.total !== undefined) head.total = b.total;
  if (b.link && b.link.length) head.link = b.link;
  const headText = JSON.stringify(head);
  if (b.entry.length === 0) return headText;
  const parts: string[] = [];
  for (const e of b.entry) {
    const { resource, ...rest } = e;
    const restText = JSON.stringify(rest);
    if (resource === undefined) {
      parts.push(restText);
    } else if (restText === '{}') {
      parts.push(`{"resource":${resource}}`);
    } else {
      parts.push(`${restText.slice(0, -1)},"resource":${resource}}`);
    }
  }
  return `${headText.slice(0, -1)},"entry":[${parts.join(',')}]}`;
}
