// `_text` (the narrative) and `_content` (the whole resource): full-text search of words, case- and accent-insensitive
// (API.md §11 "Search"). https://hl7.org/fhir/R4/search.html#text
//
// Words are cut and folded here, in JS, both when a resource is indexed and when a query is read: lower case, accents
// removed (NFD, combining marks dropped), split on anything that is not a letter or a digit. PostgreSQL then only
// stores the words as given (`array_to_tsvector`) and matches them (`@@` on a tsquery of quoted words), so neither
// its text-search parser, its locale nor the `unaccent` extension is involved: the same words on every engine
// (embedded PostgreSQL, PGlite, an external server without contrib). Positions are not kept (no phrase search), so a
// resource's vector is the set of its distinct words, small and cheap to write (sp_text, migration 019).
import { FhirError } from '../outcome.js';
import type { Resource } from '../types.js';
import { isResourceType } from './model.js';
import type { SearchFilter } from './request.js';

export const FULL_TEXT_PARAMS: ReadonlySet<string> = new Set(['_text', '_content']);

/** Longest word kept: longer ones (base64, hashes) are cut to this length, in the index and in queries alike. */
export const MAX_WORD = 64;
/** Most characters of distinct words kept per resource and part (a tsvector stays far below its 1 MB limit). */
export const MAX_INDEXED_CHARS = 200_000;
/** Most words of one query value, and most characters of a value. */
export const MAX_QUERY_WORDS = 32;
export const MAX_QUERY_CHARS = 4096;

/** Resource types without a `text` (Resource, not DomainResource): `_text` does not apply to them. */
const NO_NARRATIVE = new Set(['Bundle', 'Binary', 'Parameters']);

/** Whether `code` (`_text` or `_content`) can be searched on `resourceType`. */
export function supportsFullText(resourceType: string, code: string): boolean {
  if (!isResourceType(resourceType)) return false;
  if (code === '_content') return true;
  return code === '_text' && !NO_NARRATIVE.has(resourceType);
}

const ASCII = /^[\x20-\x7e]*$/;
const MARKS = /\p{M}/gu;
const NON_WORD = /[^\p{L}\p{N}]+/u;

/** Lower case, accents removed. */
function fold(s: string): string {
  const lower = s.toLowerCase();
  return ASCII.test(lower) ? lower : lower.normalize('NFD').replace(MARKS, '');
}

/** The words of a text, folded and cut to MAX_WORD (duplicates kept). */
export function wordsOf(text: string): string[] {
  const out: string[] = [];
  for (const w of fold(text).split(NON_WORD)) {
    if (w) out.push(w.length > MAX_WORD ? w.slice(0, MAX_WORD) : w);
  }
  return out;
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };

/** The text of an XHTML fragment (a narrative `div`): tags dropped, character references decoded. */
export function xhtmlText(div: string): string {
  return div
    .replace(/<[^>]*>/g, ' ')
    .replace(/&(#x[0-9a-fA-F]{1,6}|#[0-9]{1,7}|[a-zA-Z]{2,8});/g, (m, ref: string) => {
      if (ref[0] !== '#') return ENTITIES[ref.toLowerCase()] ?? ' ';
      const cp = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return cp > 0 && cp <= 0x10ffff ? String.fromCodePoint(cp) : ' ';
    });
}

/** Collects distinct words up to MAX_INDEXED_CHARS. */
class WordSet {
  readonly words = new Set<string>();
  private chars = 0;
  add(text: string): void {
    if (this.chars >= MAX_INDEXED_CHARS) return;
    for (const w of wordsOf(text)) {
      if (this.words.has(w)) continue;
      this.words.add(w);
      this.chars += w.length + 1;
      if (this.chars >= MAX_INDEXED_CHARS) return;
    }
  }
  text(): string {
    return [...this.words].join(' ');
  }
}

/** Keys whose values are not text: base64 data (Attachment.data, Binary.data, Signature.data, SampledData.data). */
const SKIPPED_KEYS = new Set(['data']);
/** Top-level keys left out of `_content`: bookkeeping, not content. */
const SKIPPED_TOP = new Set(['resourceType', 'id', 'meta']);

function collectStrings(value: unknown, key: string, into: WordSet, depth: number): void {
  if (typeof value === 'string') {
    into.add(key === 'div' && value.startsWith('<') ? xhtmlText(value) : value);
    return;
  }
  if (value === null || typeof value !== 'object' || depth > 128) return;
  if (Array.isArray(value)) {
    for (const v of value) collectStrings(v, key, into, depth + 1);
    return;
  }
  for (const [k, v] of Object.entries(value)) {
    if (!SKIPPED_KEYS.has(k)) collectStrings(v, k, into, depth + 1);
  }
}

/**
 * The words of a resource, each part's distinct words separated by spaces: `narrative` (its `text.div`, tags
 * stripped) and `content` (every string value of the resource, narratives included as text, contained resources
 * too; not `id`, `meta` nor base64 data).
 */
export function fullTextWords(resource: Resource): { narrative: string; content: string } {
  const narrative = new WordSet();
  const div = (resource as { text?: { div?: unknown } }).text?.div;
  if (typeof div === 'string') narrative.add(xhtmlText(div));
  const content = new WordSet();
  for (const [k, v] of Object.entries(resource)) {
    if (!SKIPPED_TOP.has(k) && !SKIPPED_KEYS.has(k)) collectStrings(v, k, content, 1);
  }
  return { narrative: narrative.text(), content: content.text() };
}

/** The sp_text column a full-text parameter reads. */
const COLUMN: Record<string, string> = { _text: 'narrative', _content: 'content' };

const bad = (message: string, code: string): FhirError => new FhirError('invalid', message, `search.${code}`);

/**
 * The tsquery text of one `_text`/`_content` value: its words AND'ed; a term ending in `*` matches words starting with
 * its last word (`hyper*`). Only letters and digits reach the query, each word quoted: no tsquery syntax from the
 * request is ever read as such.
 */
function termsQuery(key: string, value: string): string {
  if (value.length > MAX_QUERY_CHARS)
    throw bad(`The value of '${key}' is too long (at most ${MAX_QUERY_CHARS} characters)`, 'text-too-long');
  const parts: string[] = [];
  for (const term of value.split(/\s+/)) {
    const words = wordsOf(term);
    const prefix = term.endsWith('*');
    words.forEach((w, i) => parts.push(`'${w}'${prefix && i === words.length - 1 ? ':*' : ''}`));
  }
  if (parts.length === 0)
    throw bad(`The value of '${key}' has no words to search (letters or digits)`, 'text-no-words');
  if (parts.length > MAX_QUERY_WORDS)
    throw bad(
      `The value of '${key}' has ${parts.length} words (at most ${MAX_QUERY_WORDS})`,
      'text-too-many-words',
    );
  return parts.join(' & ');
}

/**
 * A `_text`/`_content` filter (`key` is the parameter as written, with its modifier if any): comma-separated values
 * are OR'ed, as for every parameter; a value's words are AND'ed.
 */
export function parseFullText(resourceType: string, key: string, value: string): SearchFilter {
  const code = key.split(':')[0] as string;
  if (key !== code)
    throw bad(
      `Unknown or unsupported modifier ':${key.slice(code.length + 1)}' on '${code}'`,
      'bad-modifier',
    );
  if (!supportsFullText(resourceType, code)) {
    throw bad(`Unknown search parameter '${code}' for resource type ${resourceType}`, 'unknown-param');
  }
  const alternatives = value
    .split(/(?<!\\),/)
    .filter((v) => v.trim() !== '')
    .map((v) => termsQuery(code, v));
  if (alternatives.length === 0) throw bad(`Missing value for '${key}'`, 'empty-value');
  const query =
    alternatives.length === 1 ? (alternatives[0] as string) : alternatives.map((q) => `(${q})`).join(' | ');
  return { code, type: 'string', values: [{ kind: 'fulltext', query }] };
}

/** Whether a parsed filter is a `_text`/`_content` one. */
export function isFullTextFilter(f: SearchFilter): boolean {
  return f.values[0]?.kind === 'fulltext';
}

/**
 * The condition on resources row `a` of a `_text`/`_content` filter: its rid among those whose words match, found
 * through the GIN index of the column (sp_text_narrative, sp_text_content).
 */
export function fullTextCondition(
  resourceType: string,
  f: SearchFilter,
  a: string,
  bind: (v: unknown) => string,
): string {
  const v = f.values[0];
  const column = COLUMN[f.code];
  if (v?.kind !== 'fulltext' || !column) return 'FALSE';
  return (
    `${a}.rid IN (SELECT ft.rid FROM sp_text ft WHERE ft.${column} @@ ${bind(v.query)}::tsquery ` +
    `AND ft.resource_type = ${bind(resourceType)})`
  );
}
