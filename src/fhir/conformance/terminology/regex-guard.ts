// The `regex` filter of a ValueSet (https://hl7.org/fhir/R4/valueset-filter-operator.html): a pattern the whole value
// must match. JavaScript's backtracking engine can take exponential time on patterns like `(a+)+$`, so a pattern is
// compiled only when it is short (MAX_PATTERN) and has none of the constructs that make backtracking blow up: no
// backreferences or lookaround, and no quantified group that itself holds a quantifier or an alternation (nested
// quantifiers: `(a+)+`, `(a|aa)*`, `(.*a){20}`). What it is matched against is bounded too (MAX_INPUT: longer values do
// not match), and at most MAX_UNBOUNDED unbounded quantifiers (`*`, `+`, `{n,}`) may appear: two `.*` backtrack over
// the input's length squared at worst, three would make it cubed. Any other pattern is refused with 422 rather than
// risk a request that never ends; and a filter over a whole code system has a time budget (filters.ts).
import { FhirError } from '../../outcome.js';

export const MAX_PATTERN = 256;
export const MAX_INPUT = 256;
export const MAX_UNBOUNDED = 2;

const refuse = (why: string): FhirError =>
  new FhirError('not-supported', `The regex filter is not supported: ${why}`, 'terminology.regex', {
    status: 422,
  });

/** Where a quantifier starts at `i` (`*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}`), or false. */
function quantifierAt(p: string, i: number): boolean {
  const c = p[i];
  if (c === '*' || c === '+' || c === '?') return true;
  return c === '{' && /^\{\d+(,\d*)?\}/.test(p.slice(i, i + 16));
}

const unboundedAt = (p: string, i: number): boolean =>
  p[i] === '*' || p[i] === '+' || (p[i] === '{' && /^\{\d+,\}/.test(p.slice(i, i + 16)));

/** Throws unless the pattern's shape is one that matches in time linear-ish in its input. */
export function checkPattern(p: string): void {
  if (p.length > MAX_PATTERN) throw refuse(`patterns are limited to ${MAX_PATTERN} characters`);
  // Per open group: whether it holds a quantifier or an alternation so far.
  const groups: { risky: boolean }[] = [];
  let inClass = false;
  let unbounded = 0;
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    if (c === '\\') {
      const n = p[i + 1] ?? '';
      if (/[1-9k]/.test(n)) throw refuse('backreferences are not allowed');
      i++;
      continue;
    }
    if (inClass) {
      if (c === ']') inClass = false;
      continue;
    }
    if (c === '[') inClass = true;
    else if (c === '(') {
      if (p[i + 1] === '?' && /[=!<]/.test(p[i + 2] ?? '') && !/^\(\?<[A-Za-z]/.test(p.slice(i, i + 4)))
        throw refuse('lookaround is not allowed');
      if (/^\(\?<[A-Za-z]/.test(p.slice(i, i + 4))) throw refuse('named groups are not allowed');
      groups.push({ risky: false });
      if (p[i + 1] === '?') i += 2; // `(?:`: its `?` is no quantifier
    } else if (c === ')') {
      const g = groups.pop();
      if (!g) return; // unbalanced: the RegExp constructor says so
      if (g.risky && quantifierAt(p, i + 1))
        throw refuse('a repeated group may not hold a quantifier or an alternation (nested quantifiers)');
      if (g.risky && groups.length > 0) (groups[groups.length - 1] as { risky: boolean }).risky = true;
      if (quantifierAt(p, i + 1) && groups.length > 0)
        (groups[groups.length - 1] as { risky: boolean }).risky = true;
    } else if (c === '|' || quantifierAt(p, i)) {
      if (unboundedAt(p, i) && ++unbounded > MAX_UNBOUNDED)
        throw refuse(`at most ${MAX_UNBOUNDED} unbounded quantifiers (*, +, {n,}) are allowed`);
      if (groups.length > 0) (groups[groups.length - 1] as { risky: boolean }).risky = true;
    }
  }
}

/** A matcher of whole values for a `regex` filter's pattern (checked by checkPattern), or a 422. */
export function compileRegexFilter(pattern: string): (value: string) => boolean {
  checkPattern(pattern);
  let re: RegExp;
  try {
    re = new RegExp(`^(?:${pattern})$`, 'u');
  } catch {
    throw new FhirError(
      'invalid',
      `Invalid regex filter: ${pattern.slice(0, 64)}`,
      'terminology.regex-syntax',
      {
        status: 422,
      },
    );
  }
  return (value) => value.length <= MAX_INPUT && re.test(value);
}
