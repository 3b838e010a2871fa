// `_filter`: the filter expression language parsed into an AST and mapped onto ordinary search filters, pure.
// https://hl7.org/fhir/R4/search_filter.html
// Precedence: `not (…)` binds tightest, then `and`, then `or`; parentheses group. Each comparison becomes the filter the
// equivalent query parameter would give (parse.ts), so it reads the same index rows with the same matching rules.
import { FhirError } from '../outcome.js';
import type { SearchParamType } from './registry.js';
import type { FilterExpr, SearchFilter } from './request.js';

/** Longest `_filter` text, and deepest nesting of parentheses and `not`s (each level is one recursion). */
export const FILTER_LIMITS = { length: 4000, depth: 16 } as const;

/** The comparison operators of R4 search_filter.html, and those Cinder answers. */
const ALL_OPS = new Set([
  'eq',
  'ne',
  'co',
  'sw',
  'ew',
  'gt',
  'lt',
  'ge',
  'le',
  'ap',
  'sa',
  'eb',
  'pr',
  'po',
  'ss',
  'sb',
  'in',
  'ni',
  're',
]);
const ORDERED = new Set(['eq', 'ne', 'gt', 'lt', 'ge', 'le', 'ap', 'sa', 'eb']);
const ORDERED_TYPES = new Set<SearchParamType>(['date', 'number', 'quantity']);

/** The syntax tree of a filter, before its parameters are looked up. */
export type FilterSyntax =
  | { kind: 'and' | 'or'; args: FilterSyntax[] }
  | { kind: 'not'; arg: FilterSyntax }
  | { kind: 'compare'; path: string; op: string; value: string };

const bad = (message: string, code: string): FhirError =>
  new FhirError('invalid', `Invalid _filter: ${message}`, `search.filter-${code}`);

const unsupported = (message: string): FhirError =>
  new FhirError('not-supported', `Unsupported _filter: ${message}`, 'search.filter-unsupported');

type Token = { t: 'word' | 'string' | '(' | ')' | '[' | ']'; v: string; at: number };

const SINGLE = new Set(['(', ')', '[', ']']);
const ESCAPES: Record<string, string> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};

/** Words, JSON-style strings and brackets; whitespace separates. */
function tokenize(text: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    if (/\s/.test(c)) {
      i++;
    } else if (SINGLE.has(c)) {
      out.push({ t: c as Token['t'], v: c, at: i });
      i++;
    } else if (c === '"') {
      const at = i;
      let v = '';
      i++;
      for (;;) {
        if (i >= text.length) throw bad(`unterminated string starting at character ${at + 1}`, 'string');
        const d = text[i] as string;
        if (d === '"') break;
        if (d === '\\') {
          const e = text[i + 1] ?? '';
          if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) {
            v += String.fromCharCode(parseInt(text.slice(i + 2, i + 6), 16));
            i += 6;
            continue;
          }
          const mapped = ESCAPES[e];
          if (mapped === undefined) throw bad(`bad escape '\\${e}' at character ${i + 1}`, 'string');
          v += mapped;
          i += 2;
          continue;
        }
        v += d;
        i++;
      }
      out.push({ t: 'string', v, at });
      i++;
    } else {
      const at = i;
      while (i < text.length && !/[\s()[\]"]/.test(text[i] as string)) i++;
      out.push({ t: 'word', v: text.slice(at, i), at });
    }
  }
  return out;
}

/** Parses a `_filter` value into its syntax tree, or a 400 naming what is wrong and where. */
export function parseFilterSyntax(text: string): FilterSyntax {
  if (text.length > FILTER_LIMITS.length)
    throw bad(`${text.length} characters (at most ${FILTER_LIMITS.length})`, 'too-long');
  const tokens = tokenize(text);
  let pos = 0;
  const peek = (): Token | undefined => tokens[pos];
  const where = (): string => {
    const t = peek();
    return t ? `at character ${t.at + 1} ('${t.v.slice(0, 32)}')` : 'at the end';
  };
  const keyword = (t: Token | undefined, k: string): boolean => t?.t === 'word' && t.v.toLowerCase() === k;
  const expect = (type: Token['t']): Token => {
    const t = peek();
    if (t?.t !== type) throw bad(`expected '${type === 'word' ? 'a parameter' : type}' ${where()}`, 'syntax');
    pos++;
    return t;
  };

  const orExpr = (depth: number): FilterSyntax => {
    const args = [andExpr(depth)];
    while (keyword(peek(), 'or')) {
      pos++;
      args.push(andExpr(depth));
    }
    return args.length === 1 ? (args[0] as FilterSyntax) : { kind: 'or', args };
  };
  const andExpr = (depth: number): FilterSyntax => {
    const args = [unary(depth)];
    while (keyword(peek(), 'and')) {
      pos++;
      args.push(unary(depth));
    }
    return args.length === 1 ? (args[0] as FilterSyntax) : { kind: 'and', args };
  };
  const group = (depth: number): FilterSyntax => {
    if (depth >= FILTER_LIMITS.depth)
      throw bad(`nested deeper than ${FILTER_LIMITS.depth} levels`, 'too-deep');
    expect('(');
    const inner = orExpr(depth + 1);
    expect(')');
    return inner;
  };
  const unary = (depth: number): FilterSyntax => {
    const t = peek();
    if (keyword(t, 'not') && tokens[pos + 1]?.t === '(') {
      pos++;
      return { kind: 'not', arg: group(depth) };
    }
    if (t?.t === '(') return group(depth);
    return comparison();
  };
  const comparison = (): FilterSyntax => {
    const path = expect('word').v;
    if (peek()?.t === '[')
      throw unsupported(`filtered paths ('${path}[…]') are not supported; use a chained parameter`);
    if (
      !/^[A-Za-z_][A-Za-z0-9_-]*(:[A-Z][A-Za-z]*)?(\.[A-Za-z_][A-Za-z0-9_-]*(:[A-Z][A-Za-z]*)?)*$/.test(path)
    )
      throw bad(`'${path.slice(0, 64)}' is not a parameter name`, 'syntax');
    const opToken = peek();
    if (opToken?.t !== 'word' || !ALL_OPS.has(opToken.v.toLowerCase()))
      throw bad(`expected a comparison operator after '${path}' ${where()}`, 'syntax');
    pos++;
    const value = peek();
    if (value?.t !== 'word' && value?.t !== 'string') throw bad(`expected a value ${where()}`, 'syntax');
    pos++;
    return { kind: 'compare', path, op: opToken.v.toLowerCase(), value: value.v };
  };

  if (tokens.length === 0) throw bad('empty expression', 'syntax');
  const tree = orExpr(0);
  if (pos < tokens.length) throw bad(`unexpected ${where()}`, 'syntax');
  return tree;
}

/** What filter.ts needs of the search parser: the type of a (chained) parameter path, and a `key=value` filter. */
export interface FilterParams {
  /** The type of the parameter at the end of `path` (`subject:Patient.name`); a 400 naming it when unknown. */
  typeOf(path: string): { type: SearchParamType; column?: boolean };
  /** The filter that the query parameter `key=value` gives (value escaped as in a query). */
  filter(key: string, value: string): SearchFilter;
}

/** A literal as one query value: `,` `$` `\` (and `|` unless it separates a token's parts) escaped. */
function escapeValue(v: string, keepBars: boolean): string {
  return v.replace(keepBars ? /[,$\\]/g : /[,$|\\]/g, (c) => `\\${c}`);
}

/** The filter at the end of a chain or reverse chain (where a `match` goes). */
function innermost(f: SearchFilter): SearchFilter {
  const next = f.chain?.filter ?? f.has?.filter;
  return next ? innermost(next) : f;
}

/** One comparison as a FilterExpr over the filter(s) the equivalent query parameters give. */
function compare(c: Extract<FilterSyntax, { kind: 'compare' }>, params: FilterParams): FilterExpr {
  const { path, op, value } = c;
  if (op === 'po' || op === 'ss' || op === 'sb' || op === 'in' || op === 'ni' || op === 're')
    throw unsupported(`the operator '${op}' is not supported`);
  const { type, column } = params.typeOf(path);
  const leaf = (key: string, v: string): FilterExpr => ({ op: 'leaf', filter: params.filter(key, v) });
  const wrongOp = (): FhirError =>
    bad(`the operator '${op}' does not apply to '${path}' (a ${type} parameter)`, 'operator');
  if (op === 'pr') {
    if (value !== 'true' && value !== 'false') throw bad(`'pr' takes true or false, not '${value}'`, 'value');
    if (column) throw wrongOp();
    return leaf(`${path}:missing`, value === 'true' ? 'false' : 'true');
  }
  if (ORDERED_TYPES.has(type)) {
    if (!ORDERED.has(op)) throw wrongOp();
    return leaf(path, `${op}${escapeValue(value, type === 'quantity')}`);
  }
  const negate = (e: FilterExpr): FilterExpr => (op === 'ne' ? { op: 'not', arg: e } : e);
  if (type === 'string') {
    if (op === 'co') return leaf(`${path}:contains`, escapeValue(value, false));
    const e = leaf(path, escapeValue(value, false));
    if (op === 'sw') return e;
    if (op !== 'eq' && op !== 'ne' && op !== 'ew') throw wrongOp();
    const f = innermost((e as Extract<FilterExpr, { op: 'leaf' }>).filter);
    f.values = f.values.map((v) => (v.kind === 'string' ? { ...v, match: op === 'ew' ? 'ew' : 'eq' } : v));
    return negate(e);
  }
  if (op !== 'eq' && op !== 'ne') throw wrongOp();
  return negate(leaf(path, escapeValue(value, type === 'token')));
}

function build(s: FilterSyntax, params: FilterParams): FilterExpr {
  switch (s.kind) {
    case 'and':
    case 'or':
      return { op: s.kind, args: s.args.map((a) => build(a, params)) };
    case 'not':
      return { op: 'not', arg: build(s.arg, params) };
    case 'compare':
      return compare(s, params);
  }
}

/** A `_filter` value as one search filter (AND'ed with the request's others). */
export function parseFilterParameter(text: string, params: FilterParams): SearchFilter {
  return { code: '_filter', type: 'special', values: [], expr: build(parseFilterSyntax(text), params) };
}

/** The leaf filters of an expression. */
export function leaves(e: FilterExpr): SearchFilter[] {
  switch (e.op) {
    case 'leaf':
      return [e.filter];
    case 'not':
      return leaves(e.arg);
    default:
      return e.args.flatMap(leaves);
  }
}

/** The expression with each leaf filter replaced by `fn` of it. */
export function mapLeaves(e: FilterExpr, fn: (f: SearchFilter) => SearchFilter): FilterExpr {
  switch (e.op) {
    case 'leaf':
      return { op: 'leaf', filter: fn(e.filter) };
    case 'not':
      return { op: 'not', arg: mapLeaves(e.arg, fn) };
    default:
      return { op: e.op, args: e.args.map((a) => mapLeaves(a, fn)) };
  }
}
