// Checks of FHIR R4 primitive values in their JSON form. https://hl7.org/fhir/R4/datatypes.html#primitive
// and https://hl7.org/fhir/R4/json.html#primitive. The regexes come from the StructureDefinitions (the
// `http://hl7.org/fhir/StructureDefinition/regex` extension on each primitive type's `value` element).
import { definitions } from '../definitions/index.js';

/** Returns undefined when the value is valid, else a short description of what is wrong. */
export type PrimitiveCheck = (value: unknown) => string | undefined;

const XML_SPACE = ' \\t\\n\\r';

/**
 * Compiles a spec regex into an anchored JS RegExp. The spec regexes follow XML Schema, where `\s` is only
 * [ \t\n\r]; in JS `\s`/`\S` also cover Unicode spaces (e.g. U+00A0), which would reject valid strings.
 * So `\s` and `\S` are rewritten to the XML Schema classes.
 */
export function compileSpecRegex(source: string): RegExp {
  let out = '';
  let i = 0;
  while (i < source.length) {
    const c = source[i] as string;
    if (c === '\\') {
      const n = source[i + 1] ?? '';
      if (n === 's') out += `[${XML_SPACE}]`;
      else if (n === 'S') out += `[^${XML_SPACE}]`;
      else out += c + n;
      i += 2;
    } else if (c === '[') {
      // A character class: copy it, rewriting \s inside; a non-negated class holding \S becomes an alternation.
      let j = i + 1;
      const negated = source[j] === '^';
      if (negated) j++;
      let body = '';
      let hasNotSpace = false;
      while (j < source.length && source[j] !== ']') {
        const d = source[j] as string;
        if (d === '\\') {
          const n = source[j + 1] ?? '';
          if (n === 's') body += XML_SPACE;
          else if (n === 'S') hasNotSpace = true;
          else body += d + n;
          j += 2;
        } else {
          body += d;
          j++;
        }
      }
      if (hasNotSpace && !negated) {
        // [ \r\n\t\S] (string, markdown) is any character: the union of the listed spaces and non-spaces.
        const spaces = ['\\t', '\\n', '\\r', ' '];
        const rest = spaces.reduce((b, sp) => b.split(sp).join(''), body);
        const missing = spaces.filter((sp) => !body.includes(sp)).join('');
        if (rest === '') out += missing ? `[^${missing}]` : '[\\s\\S]';
        else out += `(?:[${body}]|[^${XML_SPACE}])`;
      } else if (hasNotSpace) {
        // [^…\S] = whitespace not in the rest: not used by the R4 regexes; keep JS semantics.
        out += `[^${body}\\S]`;
      } else {
        out += `[${negated ? '^' : ''}${body}]`;
      }
      i = j + 1;
    } else {
      out += c;
      i++;
    }
  }
  return new RegExp(`^(?:${out})$`);
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** For a value that matched a date/dateTime/instant regex: is its day (if any) a real calendar day? */
function realCalendarDay(s: string): boolean {
  if (s.length < 10) return true; // YYYY or YYYY-MM
  const year = Number(s.slice(0, 4));
  const month = Number(s.slice(5, 7));
  const day = Number(s.slice(8, 10));
  if (month === 2 && day === 29) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return day <= (DAYS_IN_MONTH[month - 1] ?? 0);
}

/** base64Binary: linear-time equivalent of the spec regex `(\s*([0-9a-zA-Z\+/=]){4}\s*)+` (no backtracking). */
function isBase64(s: string): boolean {
  let run = 0;
  let groups = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 32 || c === 9 || c === 10 || c === 13) {
      if (run % 4 !== 0) return false;
      groups += run;
      run = 0;
    } else if (
      (c >= 48 && c <= 57) || // 0-9
      (c >= 65 && c <= 90) || // A-Z
      (c >= 97 && c <= 122) || // a-z
      c === 43 || // +
      c === 47 || // /
      c === 61 // =
    ) {
      run++;
    } else return false;
  }
  if (run % 4 !== 0) return false;
  return groups + run > 0;
}

// "Strings SHALL NOT exceed 1MB (1024*1024 characters)": string and its specialisations, not xhtml/base64Binary.
const MAX_STRING = 1024 * 1024;
const INT_MIN = -2147483648;
const INT_MAX = 2147483647;

/** `null`, `an array`, `an object`, `a JSON string`, … for messages. */
export function describeJson(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v === 'object' ? 'an object' : `a JSON ${typeof v}`;
}

/**
 * A JSON number beyond the range of a double (`1e309`) is parsed as ±Infinity: it is a number, only one too large
 * for this server to hold, and is said to be so.
 */
const tooLarge = (v: unknown): boolean => typeof v === 'number' && !Number.isFinite(v);

function integerCheck(min: number, label: string): PrimitiveCheck {
  return (v) => {
    if (tooLarge(v)) return `Value is out of range for ${label} (${min} to ${INT_MAX})`;
    if (typeof v === 'number' && !Number.isInteger(v))
      return `Expected ${label} (a JSON integer), got a number with a fractional part: ${v}`;
    if (typeof v !== 'number') return `Expected ${label} (a JSON integer), got ${describeJson(v)}`;
    if (v < min || v > INT_MAX) return `Value ${v} is out of range for ${label}`;
    return undefined;
  };
}

function stringCheck(type: string, test?: (s: string) => boolean): PrimitiveCheck {
  return (v) => {
    if (typeof v !== 'string') return `Expected ${type} (a JSON string), got ${describeJson(v)}`;
    if (v.length === 0) return 'Empty string is not allowed';
    if (v.length > MAX_STRING && type !== 'xhtml' && type !== 'base64Binary') {
      return `The ${type} value exceeds 1MB`;
    }
    if (test && !test(v)) return `Invalid ${type}: '${v.length > 80 ? v.slice(0, 80) + '…' : v}'`;
    return undefined;
  };
}

function buildChecks(): Map<string, PrimitiveCheck> {
  const checks = new Map<string, PrimitiveCheck>();
  const regex = definitions().primitiveRegex;
  for (const [type, kind] of definitions().kinds) {
    if (kind !== 'primitive') continue;
    const src = regex.get(type);
    const re = src ? compileSpecRegex(src) : undefined;
    switch (type) {
      case 'boolean':
        checks.set(type, (v) =>
          typeof v === 'boolean' ? undefined : `Expected boolean, got ${describeJson(v)}`,
        );
        break;
      case 'integer':
        checks.set(type, integerCheck(INT_MIN, 'integer'));
        break;
      case 'positiveInt':
        checks.set(type, integerCheck(1, 'positiveInt'));
        break;
      case 'unsignedInt':
        checks.set(type, integerCheck(0, 'unsignedInt'));
        break;
      case 'decimal':
        checks.set(type, (v) => {
          if (tooLarge(v))
            return `Decimal value out of range: its magnitude exceeds ${Number.MAX_VALUE}, the largest this server accepts`;
          return typeof v === 'number'
            ? undefined
            : `Expected decimal (a JSON number), got ${describeJson(v)}`;
        });
        break;
      case 'base64Binary':
        checks.set(type, stringCheck(type, isBase64));
        break;
      case 'xhtml':
        // The narrative must be an XHTML <div> (https://hl7.org/fhir/R4/narrative.html#xhtml).
        checks.set(
          type,
          stringCheck(type, (s) => s.trimStart().startsWith('<div')),
        );
        break;
      case 'date':
      case 'dateTime':
      case 'instant':
        checks.set(
          type,
          stringCheck(type, (s) => (!re || re.test(s)) && realCalendarDay(s)),
        );
        break;
      default:
        // string, markdown, code, id, uri, url, canonical, oid, uuid, time, …
        checks.set(type, stringCheck(type, re ? (s) => re.test(s) : undefined));
    }
  }
  return checks;
}

let memo: Map<string, PrimitiveCheck> | undefined;

/** The check of each primitive type code (built once). */
export function primitiveChecks(): Map<string, PrimitiveCheck> {
  memo ??= buildChecks();
  return memo;
}
