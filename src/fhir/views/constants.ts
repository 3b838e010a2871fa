// ViewDefinition `constant`s as FHIRPath literals: "these placeholders are replaced by the value of the constant before
// the FHIRPath expression is evaluated", so `%bd` from `valueDate` compares as a Date, not as a string.
// https://sql-on-fhir.org/ig/StructureDefinition-ViewDefinition.html#using-constants
import { viewError, type ViewConstant } from './view-definition.js';

// FHIR R4 primitive formats (https://hl7.org/fhir/R4/datatypes.html#primitive); checked because the text becomes
// part of an expression.
const DATE = /^\d{4}(-\d{2}(-\d{2})?)?$/;
const DATE_TIME = /^\d{4}(-\d{2}(-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$/;
const TIME = /^\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/;
const INTEGER_TYPES = new Set(['Integer', 'Integer64', 'PositiveInt', 'UnsignedInt']);

const bad = (c: ViewConstant, why: string): Error =>
  viewError(
    `Invalid ViewDefinition: constant ${c.name}: value${c.type} ${why}`,
    'views.invalid-constant',
    `ViewDefinition.constant.value${c.type}`,
  );

/** A FHIRPath string literal (https://hl7.org/fhirpath/#string): backslash and quote escaped. */
export function stringLiteral(text: string): string {
  return `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\r/g, '\\r').replace(/\n/g, '\\n')}'`;
}

function numberLiteral(c: ViewConstant): string {
  const n = c.value;
  if (typeof n !== 'number' || !Number.isFinite(n)) throw bad(c, 'must be a number');
  if (INTEGER_TYPES.has(c.type)) {
    if (!Number.isSafeInteger(n)) throw bad(c, 'must be an integer');
    if ((c.type === 'PositiveInt' && n < 1) || (c.type === 'UnsignedInt' && n < 0))
      throw bad(c, 'is out of range');
    return n < 0 ? `(${n})` : String(n);
  }
  // A decimal literal keeps a fraction, so that `1` stays a Decimal; exponent forms are written out.
  let text = Math.abs(n) >= 1e21 || (n !== 0 && Math.abs(n) < 1e-6) ? n.toFixed(20) : String(n);
  if (!text.includes('.')) text += '.0';
  return n < 0 ? `(${text})` : text;
}

/** The FHIRPath literal of a constant's value; throws a 422 naming the constant when the value does not fit its type. */
export function constantLiteral(c: ViewConstant): string {
  if (c.type === 'Boolean') {
    if (typeof c.value !== 'boolean') throw bad(c, 'must be true or false');
    return String(c.value);
  }
  if (c.type === 'Decimal' || INTEGER_TYPES.has(c.type)) return numberLiteral(c);
  if (typeof c.value !== 'string') throw bad(c, 'must be a string');
  const text = c.value;
  switch (c.type) {
    case 'Date':
      if (!DATE.test(text)) throw bad(c, 'is not a date');
      return `@${text}`;
    case 'DateTime':
    case 'Instant':
      if (!DATE_TIME.test(text)) throw bad(c, `is not a ${c.type === 'Instant' ? 'instant' : 'dateTime'}`);
      // `@2015` is a Date literal; a trailing `T` makes it a DateTime.
      return text.includes('T') ? `@${text}` : `@${text}T`;
    case 'Time':
      if (!TIME.test(text)) throw bad(c, 'is not a time');
      return `@T${text}`;
    default:
      return stringLiteral(text);
  }
}

/**
 * Replaces each `%name` (or `` %`name` ``) of a constant with its literal, outside string literals, delimited
 * identifiers and comments. Other `%` variables (`%rowIndex`, `%resource`, an undefined name) are left for the
 * engine and the check of variables.
 */
export function substituteConstants(expression: string, literals: ReadonlyMap<string, string>): string {
  if (literals.size === 0 || !expression.includes('%')) return expression;
  let out = '';
  let i = 0;
  while (i < expression.length) {
    const c = expression[i] as string;
    const end = skipToken(expression, i);
    if (end > i) {
      out += expression.slice(i, end);
      i = end;
    } else if (c === '%') {
      const m = /^%(?:([A-Za-z_][A-Za-z0-9_]*)|`((?:[^`\\]|\\.)*)`)/.exec(expression.slice(i));
      const name = m ? (m[1] ?? m[2]) : undefined;
      const literal = name === undefined ? undefined : literals.get(name);
      if (m && literal !== undefined) {
        out += literal;
        i += m[0].length;
      } else {
        out += c;
        i++;
      }
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** The end of a string literal, delimited identifier or comment starting at `i`, or `i` when none starts there. */
function skipToken(s: string, i: number): number {
  const c = s[i];
  if (c === "'" || c === '`' || c === '"') {
    let j = i + 1;
    while (j < s.length && s[j] !== c) j += s[j] === '\\' ? 2 : 1;
    return Math.min(j + 1, s.length);
  }
  if (c === '/' && s[i + 1] === '/') {
    const nl = s.indexOf('\n', i);
    return nl < 0 ? s.length : nl;
  }
  if (c === '/' && s[i + 1] === '*') {
    const close = s.indexOf('*/', i + 2);
    return close < 0 ? s.length : close + 2;
  }
  return i;
}
