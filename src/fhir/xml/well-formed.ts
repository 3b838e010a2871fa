// Well-formedness of XML text (https://www.w3.org/TR/xml/#sec-well-formed), checked in one linear pass before
// fast-xml-parser builds anything (it is lenient: mismatched end tags pass) and for narratives before they are written
// into a document. No DTD is ever read, so `&` may only start XML's own five entities or a character reference.

const TEXT_RUN = /[^<&]+/y;
const NAME = /[A-Za-z_][\w.:-]*/y;
const REFERENCE = /&(?:lt|gt|amp|quot|apos|#[0-9]{1,7}|#x[0-9a-fA-F]{1,6});/y;
const ATTRIBUTE = /\s+[A-Za-z_][\w.:-]*\s*=\s*(?:"[^"<]*"|'[^'<]*')/y;
const SPACE = /\s*/y;
const DECLARATION = /<\?xml\s[^?]*\?>/y;

/** Where well-formedness fails: the index in the text and what was expected. */
export class NotWellFormed extends Error {
  constructor(
    readonly index: number,
    message: string,
  ) {
    super(message);
  }

  /** The message with the line and column of `index` in `text`. */
  describe(text: string): string {
    let line = 1;
    let lineStart = 0;
    for (let i = text.indexOf('\n'); i >= 0 && i < this.index; i = text.indexOf('\n', i + 1)) {
      line++;
      lineStart = i + 1;
    }
    return `${this.message} (line ${line}, column ${this.index - lineStart + 1})`;
  }
}

class Scanner {
  i = 0;
  constructor(readonly text: string) {}

  at(re: RegExp): boolean {
    re.lastIndex = this.i;
    if (!re.test(this.text)) return false;
    this.i = re.lastIndex;
    return true;
  }

  fail(message: string): never {
    throw new NotWellFormed(this.i, message);
  }

  /** Skips a comment or processing instruction at `i`, if there is one. */
  misc(): boolean {
    const { text } = this;
    for (const [open, close] of [
      ['<!--', '-->'],
      ['<?', '?>'],
    ] as const) {
      if (!text.startsWith(open, this.i)) continue;
      const end = text.indexOf(close, this.i + open.length);
      if (end < 0) this.fail(`Unclosed ${open === '<?' ? 'processing instruction' : 'comment'}`);
      this.i = end + close.length;
      return true;
    }
    return false;
  }

  /** One element from `i` (which must be at its `<`) to the end of its end tag. Iterative: any depth is safe. */
  element(): void {
    const { text } = this;
    const n = text.length;
    const open: string[] = [];
    do {
      const c = text.charCodeAt(this.i);
      if (this.i >= n) this.fail(`Unclosed element <${open[open.length - 1] ?? ''}>`);
      if (c === 38 /* & */) {
        if (!this.at(REFERENCE))
          this.fail("'&' must start &lt; &gt; &amp; &quot; &apos; or a character reference");
        continue;
      }
      if (c !== 60 /* < */) {
        this.at(TEXT_RUN);
        continue;
      }
      if (open.length > 0 && text.startsWith('<![CDATA[', this.i)) {
        const end = text.indexOf(']]>', this.i + 9);
        if (end < 0) this.fail('Unclosed CDATA section');
        this.i = end + 3;
        continue;
      }
      if (open.length > 0 && this.misc()) continue;
      this.i++;
      const closing = text.charCodeAt(this.i) === 47; /* / */
      if (closing) this.i++;
      const start = this.i;
      if (!this.at(NAME)) this.fail('Expected an element name');
      const name = text.slice(start, this.i);
      if (closing) {
        const expected = open.pop();
        if (expected !== name) this.fail(`Expected </${expected}>, found </${name}>`);
      } else {
        const seen = new Set<string>();
        for (let a = this.i; this.at(ATTRIBUTE); a = this.i) {
          const attr = text.slice(a, this.i).trimStart();
          const attrName = attr.slice(0, attr.search(/[\s=]/));
          if (seen.has(attrName)) this.fail(`Attribute '${attrName}' repeated`);
          seen.add(attrName);
        }
      }
      this.at(SPACE);
      if (!closing && text.charCodeAt(this.i) === 47) this.i++;
      else if (!closing) open.push(name);
      if (text.charCodeAt(this.i) !== 62 /* > */) this.fail(`Malformed tag <${closing ? '/' : ''}${name}>`);
      this.i++;
    } while (open.length > 0);
  }
}

/** Throws NotWellFormed unless `text` is one XML document: an optional declaration, one root element, comments. */
export function assertWellFormedDocument(text: string): void {
  const s = new Scanner(text);
  s.at(DECLARATION);
  for (s.at(SPACE); s.misc(); s.at(SPACE));
  if (text.charCodeAt(s.i) !== 60) s.fail('Expected the root element');
  s.element();
  for (s.at(SPACE); s.misc(); s.at(SPACE));
  if (s.i < text.length) s.fail('Only comments may follow the root element');
}

/** Whether `text` is exactly one well-formed XML element (nothing before or after it). */
export function isWellFormedElement(text: string): boolean {
  if (text.charCodeAt(0) !== 60) return false;
  const s = new Scanner(text);
  try {
    s.element();
  } catch (err) {
    if (err instanceof NotWellFormed) return false;
    throw err;
  }
  return s.i === text.length;
}
