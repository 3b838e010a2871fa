// Finds the byte range of each `entry` of a FHIR Bundle's JSON text (https://hl7.org/fhir/R4/bundle.html) without
// parsing the whole Bundle, reading it in chunks: profiles-resources.json is 35 MB of text and ~200 MB of heap once
// parsed, while one chunk and one entry at a time stay small. UTF-8 never puts an ASCII byte inside a multi-byte
// character, so scanning bytes for quotes, backslashes and brackets is exact.
import fs from 'node:fs';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const ENTRY = '"entry"';
const isSpace = (b: number): boolean => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

/** A scanner fed the text in chunks; `feed` returns the [start, end) ranges of the entries that ended in the chunk. */
export class BundleEntryScanner {
  private offset = 0;
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** The text of the string being read at depth 1 (a key or value of the Bundle), while it may still be `"entry"`. */
  private key: string | undefined;
  /** The last string at depth 1 was `"entry"`; a colon after it makes it the key of what follows. */
  private afterEntryString = false;
  private lastKeyIsEntry = false;
  private inEntries = false;
  private entryStart = -1;

  feed(chunk: Buffer): [number, number][] {
    const out: [number, number][] = [];
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i] as number;
      const at = this.offset + i;
      if (this.inString) {
        if (this.key !== undefined)
          this.key = this.key.length < 8 ? this.key + String.fromCharCode(b) : undefined;
        if (this.escaped) this.escaped = false;
        else if (b === BACKSLASH) this.escaped = true;
        else if (b === QUOTE) {
          this.inString = false;
          this.afterEntryString = this.key === ENTRY;
          this.key = undefined;
        }
        continue;
      }
      if (isSpace(b)) continue;
      const afterEntry = this.afterEntryString;
      this.afterEntryString = false;
      if (b === QUOTE) {
        this.inString = true;
        this.key = this.depth === 1 ? '"' : undefined;
      } else if (b === COLON) {
        if (this.depth === 1) this.lastKeyIsEntry = afterEntry;
      } else if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
        this.depth++;
        if (b === OPEN_ARRAY && this.depth === 2 && this.lastKeyIsEntry) this.inEntries = true;
        else if (b === OPEN_OBJECT && this.depth === 3 && this.inEntries) this.entryStart = at;
      } else if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) {
        if (b === CLOSE_OBJECT && this.depth === 3 && this.inEntries && this.entryStart >= 0) {
          out.push([this.entryStart, at + 1]);
          this.entryStart = -1;
        }
        if (b === CLOSE_ARRAY && this.depth === 2) this.inEntries = false;
        this.depth--;
      }
    }
    this.offset += chunk.length;
    return out;
  }
}

/** [start, end) byte ranges of the objects in the top-level `entry` array of a Bundle. */
export function bundleEntryRanges(buf: Buffer): [number, number][] {
  return new BundleEntryScanner().feed(buf);
}

/** The entries of a Bundle file, each as its range and its bytes, reading the file a chunk at a time. */
export function* bundleFileEntries(file: string, chunkSize = 1 << 20): Generator<[number, number, Buffer]> {
  const fd = fs.openSync(file, 'r');
  try {
    const scanner = new BundleEntryScanner();
    const chunk = Buffer.alloc(chunkSize);
    for (let pos = 0; ;) {
      const n = fs.readSync(fd, chunk, 0, chunk.length, pos);
      if (n === 0) return;
      for (const [start, end] of scanner.feed(chunk.subarray(0, n))) {
        const bytes = Buffer.alloc(end - start);
        fs.readSync(fd, bytes, 0, bytes.length, start);
        yield [start, end, bytes];
      }
      pos += n;
    }
  } finally {
    fs.closeSync(fd);
  }
}
