// A decimal keeps its written text in a view's output (`1.50` stays `1.50`, as everywhere in Cinder, issue 14): a
// column value that is a decimal element whose text the JSON parser recorded is carried as a DecimalText while rows
// are built, then becomes a JS number with its text recorded on the row (src/fhir/json/raw-numbers.ts), which the
// row writers honour. Rows crossing from the FHIRPath worker carry the texts beside them (symbols do not survive a
// structured clone). https://hl7.org/fhir/R4/datatypes.html#decimal
import { rawNumberText, setRawNumber } from '../json/raw-numbers.js';
import type { Row } from './compile.js';

export class DecimalText {
  constructor(readonly text: string) {}
}

interface Node {
  data?: unknown;
  parentResNode?: Node | null;
  fhirNodeDataType?: string | null;
  propName?: string | null;
}

// Values a view function computed with an exact text (a decimal boundary, `1.0` → `0.95`): value → text.
const computedTexts = new WeakMap<object, string>();

/** Records the exact text of a value a view function returns, which its cell then carries as written. */
export function setComputedText(value: object, text: string): void {
  computedTexts.set(value, text);
}

/**
 * The DecimalText of a fhirpath node that is a decimal element with a recorded text, or of a value a view function
 * computed with its text, else undefined.
 */
export function decimalTextOf(item: unknown): DecimalText | undefined {
  if (item !== null && typeof item === 'object') {
    const computed = computedTexts.get(item);
    if (computed !== undefined) return new DecimalText(computed);
  }
  const node = item as Node | null;
  if (!node || typeof node !== 'object' || node.fhirNodeDataType !== 'decimal' || !node.propName)
    return undefined;
  const holder = node.parentResNode?.data;
  if (
    !holder ||
    typeof holder !== 'object' ||
    typeof (holder as Record<string, unknown>)[node.propName] !== 'number'
  )
    return undefined;
  const text = rawNumberText(holder, node.propName);
  return text === undefined ? undefined : new DecimalText(text);
}

/** Replaces the row's DecimalTexts (cells, and items of collection cells) by numbers with their text recorded. */
export function settleDecimals(row: Row): Row {
  for (const [key, v] of Object.entries(row)) {
    if (v instanceof DecimalText) {
      row[key] = Number(v.text);
      setRawNumber(row, key, v.text);
    } else if (Array.isArray(v)) {
      v.forEach((item, i) => {
        if (item instanceof DecimalText) {
          v[i] = Number(item.text);
          setRawNumber(v, i, item.text);
        }
      });
    }
  }
  return row;
}

/** The recorded texts of rows' cells, `[row, column, text]` (collection items are sent as numbers). */
export function decimalTexts(rows: readonly Row[]): [number, string, string][] {
  const out: [number, string, string][] = [];
  rows.forEach((row, i) => {
    for (const key of Object.keys(row)) {
      const text = rawNumberText(row, key);
      if (text !== undefined) out.push([i, key, text]);
    }
  });
  return out;
}

/** Records the texts `decimalTexts` listed on rows received from the worker. */
export function restoreDecimalTexts(rows: Row[], texts: readonly [number, string, string][]): Row[] {
  for (const [i, key, text] of texts) {
    const row = rows[i];
    if (row) setRawNumber(row, key, text);
  }
  return rows;
}
