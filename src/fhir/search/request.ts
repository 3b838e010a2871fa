// The parsed form of a FHIR search (https://hl7.org/fhir/R4/search.html): what parse.ts produces from a query
// string and sql.ts turns into SQL.
import type { SearchParamType } from './registry.js';

export type Prefix = 'eq' | 'ne' | 'gt' | 'lt' | 'ge' | 'le' | 'sa' | 'eb' | 'ap';

export type FilterValue =
  /**
   * string: the raw text; sql.ts normalises it. `match` (from `_filter`, filter.ts): the whole value equals it
   * (`eq`) or ends with it (`ew`), case- and accent-insensitively; absent: starts with it.
   */
  | { kind: 'string'; value: string; match?: 'eq' | 'ew' }
  /** token: `system` undefined = any system, '' = no system (`|code`); `code` undefined = any code (`system|`). */
  | { kind: 'token'; system?: string; code?: string }
  /** token `:text`. */
  | { kind: 'text'; value: string }
  /** reference: any of these normalised references (`Patient/1`, `urn:uuid:...`, an absolute URL). */
  | { kind: 'reference'; refs: string[] }
  /** reference given as a bare id on a parameter with no declared targets: any type. */
  | { kind: 'reference-id'; id: string }
  /** date: the value's range [low, high) as ISO instants. */
  | { kind: 'date'; prefix: Prefix; low: string; high: string }
  /** number or quantity: the value, its implicit-precision range [low, high) and the ±10% range of `ap`. */
  | {
      kind: 'number';
      prefix: Prefix;
      value: string;
      low: string;
      high: string;
      apLow: string;
      apHigh: string;
      /** quantity only: undefined = any system; the unit code (matched against code or unit). */
      system?: string;
      unit?: string;
    }
  | { kind: 'uri'; value: string }
  /**
   * token `:in` / `:not-in` before resolution: a ValueSet canonical (`url` or `url|version`), expanded by
   * terminology.ts into a `codes` value before sql.ts sees the request.
   */
  | { kind: 'value-set'; canonical: string }
  /** token `:below` / `:above` before resolution: a code of a code system with a hierarchy (terminology.ts). */
  | { kind: 'hierarchy'; system: string; code: string }
  /** Resolved `:in`/`:not-in`/`:below`/`:above`: any of these (system, code) pairs (parallel arrays, deduplicated). */
  | {
      kind: 'codes';
      systems: string[];
      codes: string[];
      /**
       * The parameter reads `code` elements only (Patient.gender): their values are indexed without a system, which
       * their binding implies, and match by code alone.
       */
      codeOnly?: boolean;
    }
  /** token `:of-type` on an identifier: its type coding (system and code) and its value. */
  | { kind: 'of-type'; typeSystem: string; typeCode: string; value: string }
  /** reference `:identifier`: the Reference's identifier, token forms as `token` (system and/or value). */
  | { kind: 'identifier'; system?: string; value?: string }
  /**
   * composite (`code-value-quantity=http://loinc.org|8480-6$gt100`): one value per component, all met by the same
   * element; `code` is the component's index code (`code-value-quantity$1`, see extract.ts).
   */
  | { kind: 'composite'; parts: { type: SearchParamType; code: string; value: FilterValue }[] }
  /** `_text` / `_content`: a tsquery of quoted words built by full-text.ts (never text from the request as syntax). */
  | { kind: 'fulltext'; query: string };

export type Modifier =
  | 'exact'
  | 'contains'
  | 'missing'
  | 'not'
  | 'text'
  | 'above'
  | 'below'
  | 'in'
  | 'not-in'
  | 'of-type'
  | 'identifier';

export interface SearchFilter {
  /** The parameter code (`family`, `_id`, `subject`). */
  code: string;
  type: SearchParamType;
  /** `_id` and `_lastUpdated` test resources-table columns; everything else the index tables. */
  column?: 'id' | 'last_updated';
  modifier?: Modifier;
  /** `:missing=true|false`. */
  missing?: boolean;
  /**
   * `:missing=true` or token `:not` answered from its candidates in sp_missing and the value index (migration 028)
   * rather than by an anti-join: set by missing-plan.ts when those candidates are few. Never set by parsing.
   */
  fromCandidates?: boolean;
  /** OR'ed values (comma-separated in the query). */
  values: FilterValue[];
  /** Chained search (`subject:Patient.name=x`): `code` is the reference parameter, `filter` applies to its target. */
  chain?: { targetType: string; filter: SearchFilter };
  /**
   * Reverse chain (`_has:Observation:patient:code=x`): resources that a `sourceType` resource matching `filter`
   * references through its parameter `code`.
   */
  has?: { sourceType: string; code: string; filter: SearchFilter };
  /** `_filter` (filter.ts): a logical expression over filters; code `_filter`, no values of its own. */
  expr?: FilterExpr;
}

/** A `_filter` expression (https://hl7.org/fhir/R4/search_filter.html): `and`, `or`, `not` over filters. */
export type FilterExpr =
  | { op: 'and' | 'or'; args: FilterExpr[] }
  | { op: 'not'; arg: FilterExpr }
  | { op: 'leaf'; filter: SearchFilter };

export interface SortKey {
  /** A search parameter code, or `_id` / `_lastUpdated`. */
  code: string;
  type: SearchParamType;
  descending: boolean;
}

export interface IncludeSpec {
  /** The resource type holding the reference; '*' for any type (`_revinclude=*`). */
  sourceType: string;
  /** The reference parameter, or '*' for every reference parameter of sourceType (`_include=*`). */
  code: string;
  /** Only references to this type. */
  targetType?: string;
  /** `:iterate`: applied again to the resources included so far (https://hl7.org/fhir/R4/search.html#revinclude). */
  iterate?: boolean;
}

export interface SearchRequest {
  resourceType: string;
  /** AND'ed. */
  filters: SearchFilter[];
  sort: SortKey[];
  /** Page size, 0..1000 (default 20). */
  count: number;
  total?: 'none' | 'estimate' | 'accurate';
  summary?: 'true' | 'false' | 'text' | 'data' | 'count';
  /** `_elements`: top-level element names; the caller applies them with applyElements(). */
  elements?: string[];
  include: IncludeSpec[];
  revinclude: IncludeSpec[];
  /**
   * Decoded `_cursor`: the sort key values (as text) and rid of the last row of the previous page, or with `before`
   * (a `previous` link) of the first row of the next page.
   */
  cursor?: { keys: (string | null)[]; rid: number; before?: boolean };
  /**
   * Not from the query string: a compartment search (`GET Patient/<id>/Observation`) keeps resources that one of
   * `params` references as `<type>/<id>` (`{def}`: the compartment's own resource).
   */
  compartment?: { type: string; id: string; params: readonly string[] };
  /** Parameters left out under `Prefer: handling=lenient` (unknown to this type). */
  ignored?: string[];
  /** `_offset`: rows skipped before the page (offset paging, as MedplumClient asks; at most MAX_OFFSET). */
  offset?: number;
  /**
   * Not from the query string: top-level properties left out of each match's JSON text (a partial resource then),
   * for callers that read a few elements of many rows ($csv).
   */
  omit?: readonly string[];
  /**
   * System-level search (search-system.ts): the types searched, in groups whose filters are the same (the query
   * parsed for each type; `filters` above are then unused). `resourceType` is the first type.
   */
  system?: { types: string[]; filters: SearchFilter[] }[];
}
