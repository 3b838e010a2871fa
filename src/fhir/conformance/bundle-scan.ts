// Finds the byte range of each `entry` of a FHIR Bundle's JSON text (https://hl7.org/fhir/R4/bundle.html) without
// parsing the whole Bundle: profiles-resources.json is 35 MB of text and ~200 MB of heap once parsed, while one entry
// parsed at a time stays small. UTF-8 never puts an ASCII byte inside a multi-byte character, so scanning bytes for
// quotes, backslashes and brackets is exact.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const ENTRY = Buffer.from('"entry"');

/** [start, end) byte ranges of the objects in the top-level `entry` array of a Bundle. */
export function bundleEntryRanges(buf: Buffer): [number, number][] {
  const out: [number, number][] = [];
  let depth = 0;
  /** Where the last string at depth 1 (a key of the Bundle object) started, and whether it was `"entry"`. */
  let lastKeyIsEntry = false;
  let inEntries = false;
  let entryStart = -1;
  for (let i = 0; i < buf.length; i++) {
    const b = buf[i];
    if (b === QUOTE) {
      const start = i;
      for (i++; i < buf.length && buf[i] !== QUOTE; i++) if (buf[i] === BACKSLASH) i++;
      if (depth === 1) {
        let j = i + 1;
        while (j < buf.length && (buf[j] === 0x20 || buf[j] === 0x0a || buf[j] === 0x0d || buf[j] === 0x09))
          j++;
        if (buf[j] === COLON) lastKeyIsEntry = buf.compare(ENTRY, 0, ENTRY.length, start, i + 1) === 0;
      }
    } else if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
      depth++;
      if (b === OPEN_ARRAY && depth === 2 && lastKeyIsEntry) inEntries = true;
      else if (b === OPEN_OBJECT && depth === 3 && inEntries) entryStart = i;
    } else if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) {
      if (b === CLOSE_OBJECT && depth === 3 && inEntries && entryStart >= 0) {
        out.push([entryStart, i + 1]);
        entryStart = -1;
      }
      if (b === CLOSE_ARRAY && depth === 2) inEntries = false;
      depth--;
    }
  }
  return out;
}
