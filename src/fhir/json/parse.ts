// JSON text → value, keeping the written form of numbers whose JS form differs (raw-numbers.ts). JSON.parse stays the
// judge of syntax and builds the value; only when the text has such a number (a cheap scan, see `inexactNumber`) a
// second pass walks the text beside the parsed value to record those texts. Most resources take the first path only.
import { deleteRawNumber, setRawNumber } from './raw-numbers.js';

// A number token between JSON delimiters: after `:`, `,` or `[`, before `,`, `]` or `}`. Text inside strings may
// match too ("a:1.50,"), which only sends the text down the exact path, correct either way; times inside strings
// ("10:00:00.000Z") do not, as their digits are followed by `:` or a letter.
const NUMBER_AFTER_DELIMITER = /[:,[]\s*(-?\d[\d.eE+-]*)(?=\s*[,\]}])/g;

/** Whether the JSON text may hold a number that JSON.parse would not give back as written. */
export function inexactNumber(text: string): boolean {
  NUMBER_AFTER_DELIMITER.lastIndex = 0;
  for (let m = NUMBER_AFTER_DELIMITER.exec(text); m; m = NUMBER_AFTER_DELIMITER.exec(text)) {
    const token = m[1] as string;
    if (String(Number(token)) !== token) return true;
  }
  return false;
}

/** JSON.parse, with the texts of inexact numbers recorded on their holders. Throws JSON.parse's SyntaxError. */
export function parseJson(text: string): unknown {
  const value: unknown = JSON.parse(text);
  if (value !== null && typeof value === 'object' && inexactNumber(text)) recordNumberTexts(text, value);
  return value;
}

/**
 * Levels of JSON objects and arrays a request body may have in all (issue 25 point 1). Whatever walks a body
 * recursively (validation, reference rewriting, JSON.stringify, the structured clone of `Worker.postMessage`) would
 * overflow the stack somewhere beyond a few thousand levels, and a 500 or an uncaught error is no answer to a client.
 * A resource may nest MAX_RESOURCE_DEPTH (128, validation/depth.ts) levels and each resource a body carries is held to
 * that on its own (a batch answers such an entry alone); its wrappers add a few (Bundle.entry[n].resource: 3;
 * Parameters.parameter[n].part[m].resource: 5), so twice a resource's depth admits every legal body with room to spare.
 */
export const MAX_BODY_DEPTH = 256;

/** The JSON text's deepest nesting passes `max` levels of objects and arrays. Iterative; syntax is not checked. */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      // A string: brackets inside it do not count. Its closing quote is the next one not escaped, i.e. not after an
      // odd run of backslashes (indexOf is native: long texts are skipped at memory speed).
      for (;;) {
        const q = text.indexOf('"', i + 1);
        if (q < 0) return false;
        let b = q - 1;
        while (text.charCodeAt(b) === 92) b--;
        i = q;
        if ((q - 1 - b) % 2 === 0) break;
      }
    } else if (c === 123 || c === 91) {
      if (++depth > max) return true;
    } else if (c === 125 || c === 93) depth--;
  }
  return false;
}

/** A request body's JSON text nests deeper than MAX_BODY_DEPTH (thrown by parseJsonBody). */
export class JsonTooDeep extends Error {
  constructor(readonly max: number) {
    super(`The JSON nests deeper than ${max} levels of objects and arrays`);
  }
}

/**
 * parseJson for JSON a request carries: refuses text nested deeper than `max` levels (JsonTooDeep) before anything is
 * built from it, so nothing recursive ever walks such a value. Throws JSON.parse's SyntaxError for malformed text.
 */
export function parseJsonBody(text: string, max = MAX_BODY_DEPTH): unknown {
  if (nestsDeeperThan(text, max)) throw new JsonTooDeep(max);
  return parseJson(text);
}

interface Frame {
  /** The parsed container this part of the text built, or undefined when none matches (duplicate keys). */
  container: Record<string, unknown> | undefined;
  array: boolean;
  index: number;
}

const NUMBER = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

function record(holder: Record<string, unknown> | undefined, key: string | number, token: string): void {
  if (!holder) return;
  const v = holder[key];
  if (typeof v !== 'number') return;
  if (String(v) === token) deleteRawNumber(holder, key);
  else if (Object.is(v, Number(token))) setRawNumber(holder, key, token);
}

const containerAt = (h: Record<string, unknown> | undefined, k: string | number) => {
  const v = h?.[k];
  return v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : undefined;
};

/**
 * Walks valid JSON `text` beside `root` (what JSON.parse made of it) and records each inexact number's text on its
 * holder. Iterative, so nesting is bounded by memory rather than the call stack, as it is for JSON.parse.
 */
function recordNumberTexts(text: string, root: object): void {
  let i = 0;
  const ws = (): void => {
    for (let c = text.charCodeAt(i); c === 32 || c === 10 || c === 13 || c === 9; c = text.charCodeAt(++i));
  };
  const string = (): string => {
    const start = i++;
    let escaped = false;
    for (let c = text.charCodeAt(i); c !== 34; c = text.charCodeAt(++i)) {
      if (c === 92) {
        escaped = true;
        i++;
      }
    }
    i++;
    return escaped ? (JSON.parse(text.slice(start, i)) as string) : text.slice(start + 1, i - 1);
  };
  const objectKey = (): string => {
    ws();
    const k = string();
    ws();
    i++; // ':'
    return k;
  };
  const stack: Frame[] = [];
  let holder: Record<string, unknown> | undefined = { root };
  let key: string | number = 'root';
  for (;;) {
    // At the start of the value holder[key].
    ws();
    const c = text[i];
    if (c === '{' || c === '[') {
      i++;
      const frame: Frame = { container: containerAt(holder, key), array: c === '[', index: 0 };
      stack.push(frame);
      ws();
      if (text[i] !== (c === '{' ? '}' : ']')) {
        holder = frame.container;
        key = frame.array ? 0 : objectKey();
        continue;
      }
      i++;
      stack.pop();
    } else if (c === '"') string();
    else if (c === 't' || c === 'n') i += 4;
    else if (c === 'f') i += 5;
    else {
      NUMBER.lastIndex = i;
      const token = (NUMBER.exec(text) as RegExpExecArray)[0];
      i += token.length;
      record(holder, key, token);
    }
    // After a value: close finished containers, then move to the next slot.
    let next = false;
    while (!next) {
      const frame = stack[stack.length - 1];
      if (!frame) return;
      ws();
      if (text[i++] === ',') {
        holder = frame.container;
        key = frame.array ? ++frame.index : objectKey();
        next = true;
      } else stack.pop();
    }
  }
}
