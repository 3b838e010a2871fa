// FHIR XML → the FHIR JSON a client would have sent (https://hl7.org/fhir/R4/xml.html). fast-xml-parser reads the
// document (order kept, the narrative `div` kept raw); the FHIR mapping is ours. No DTD is ever read: a DOCTYPE or an
// entity declaration is refused before parsing (XXE, entity expansion), and only XML's own five entities and
// character references are decoded. Nesting is bounded before anything recursive walks the document.
import { XMLParser } from 'fast-xml-parser';
import { isResourceType, structureNode, type JsonChild, type StructureNode } from '../definitions/index.js';
import { MAX_BODY_DEPTH } from '../json/parse.js';
import { setRawNumber } from '../json/raw-numbers.js';
import { tooDeepElement } from '../validation/depth.js';
import { FhirError } from '../outcome.js';
import { assertWellFormedDocument, NotWellFormed } from './well-formed.js';
import { FHIR_NS, NUMBER_TYPES, XHTML_NS, isAttribute } from './structure.js';

type Obj = Record<string, unknown>;
/** An element as fast-xml-parser gives it with `preserveOrder`: `{ [name]: children, ':@'?: attributes }`. */
type XNode = Record<string, unknown>;

const ATTRS = ':@';
const TEXT = '#text';
const META = XMLParser.getMetaDataSymbol() as unknown as string;
const XSI_NS = 'http://www.w3.org/2001/XMLSchema-instance';
const XML_NS = 'http://www.w3.org/XML/1998/namespace';

/** Levels of XML elements a document may nest (a resource may nest 128 JSON levels, validation/depth.ts). */
export const MAX_XML_DEPTH = 256;

const parser = new XMLParser({
  preserveOrder: true,
  ignoreAttributes: false,
  attributeNamePrefix: '',
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: false,
  processEntities: false,
  stopNodes: ['*.div'],
  captureMetaData: true,
  maxNestedTags: MAX_XML_DEPTH,
  ignoreDeclaration: true,
  ignorePiTags: true,
  jPath: false,
});

const invalid = (message: string, code: string, expression?: string): FhirError =>
  new FhirError('structure', message, code, expression ? { expression: [expression] } : {});

/**
 * The JSON form of a FHIR XML resource. Throws FhirError 400 for text that is not well-formed XML, declares a DTD, nests
 * deeper than MAX_XML_DEPTH, is not in the FHIR namespace, or has elements or attributes FHIR does not define there.
 * Whether the content is a valid resource (cardinality minimums, value formats) is left to validation, as for JSON.
 */
export function fromXml(input: string): Obj {
  // Line ends are normalised by the parser, which reports positions in this text: the narrative is taken from it as
  // written.
  const text = input.replace(/^\ufeff/, '');
  if (/<!(DOCTYPE|ENTITY|ELEMENT|ATTLIST|NOTATION)/i.test(text)) {
    throw invalid('XML with a DOCTYPE or entity declarations is not accepted', 'xml.doctype');
  }
  try {
    assertWellFormedDocument(text);
  } catch (err) {
    if (err instanceof NotWellFormed) throw invalid(`Malformed XML: ${err.describe(text)}`, 'xml.malformed');
    throw err;
  }
  let doc: XNode[];
  try {
    doc = parser.parse(text) as XNode[];
  } catch (err) {
    const message = (err as Error).message;
    throw /nested/i.test(message)
      ? invalid(`The XML nests deeper than ${MAX_XML_DEPTH} levels of elements`, 'xml.too-deep')
      : invalid(`Malformed XML: ${message}`, 'xml.malformed');
  }
  const roots = elements(doc, 'the document');
  if (roots.length !== 1) throw invalid('The XML document must hold exactly one resource', 'xml.root');
  const resource = new Reader(text).resource(roots[0] as XNode, new Map([['xml', XML_NS]]), undefined);
  // A repeating element adds an array level in JSON: the JSON is held to the bound a JSON body has (json/parse.ts).
  const deep = tooDeepElement(resource, MAX_BODY_DEPTH);
  if (deep !== undefined) {
    throw invalid(
      `${String(resource.resourceType)}${deep} nests deeper than ${MAX_BODY_DEPTH} levels of JSON objects and arrays`,
      'xml.too-deep',
    );
  }
  return resource;
}

/** The element children of `children` (text between them must be whitespace). */
function elements(children: XNode[], where: string): XNode[] {
  const out: XNode[] = [];
  for (const c of children) {
    if (TEXT in c) {
      if (/\S/.test(String(c[TEXT]))) throw invalid(`Text is not allowed in ${where}`, 'xml.text', where);
    } else out.push(c);
  }
  return out;
}

function tagOf(x: XNode): string {
  for (const k in x) if (k !== ATTRS) return k;
  return '';
}

const ENTITIES: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

/** An attribute value as XML gives it: literal whitespace normalised to spaces, then references decoded. */
function attributeValue(raw: string, where: string): string {
  if (raw.includes('<'))
    throw invalid(`'<' is not allowed in an attribute value (${where})`, 'xml.malformed', where);
  const spaced = raw.replace(/[\t\n]/g, ' ');
  if (!spaced.includes('&')) return spaced;
  return spaced.replace(/&([^;&\s]*);?/g, (whole, name: string) => {
    if (!whole.endsWith(';')) throw invalid(`Malformed reference in ${where}`, 'xml.entity', where);
    const known = ENTITIES[name];
    if (known !== undefined) return known;
    const m = /^#(?:x([0-9a-fA-F]{1,6})|([0-9]{1,7}))$/.exec(name);
    const code = m ? (m[1] !== undefined ? parseInt(m[1], 16) : Number(m[2])) : NaN;
    if (!m || !validChar(code)) throw invalid(`Unknown entity '&${name};' in ${where}`, 'xml.entity', where);
    return String.fromCodePoint(code);
  });
}

function validChar(c: number): boolean {
  return (
    c === 9 ||
    c === 10 ||
    c === 13 ||
    (c >= 0x20 && c <= 0xd7ff) ||
    (c >= 0xe000 && c <= 0xfffd) ||
    (c >= 0x10000 && c <= 0x10ffff)
  );
}

type Scope = Map<string, string>;

/** The element's namespace scope (its own xmlns declarations over its parent's) and its other attributes. */
function scopeOf(x: XNode, parent: Scope, where: string): { scope: Scope; attrs: [string, string][] } {
  const raw = x[ATTRS] as Record<string, string> | undefined;
  if (!raw) return { scope: parent, attrs: [] };
  let scope = parent;
  const attrs: [string, string][] = [];
  for (const [name, value] of Object.entries(raw)) {
    if (name === 'xmlns' || name.startsWith('xmlns:')) {
      if (scope === parent) scope = new Map(parent);
      scope.set(name === 'xmlns' ? '' : name.slice(6), attributeValue(value, where));
    } else attrs.push([name, value]);
  }
  return { scope, attrs };
}

/** Namespace and local name of a qualified name (`prefix:local`, or the default namespace). */
function resolve(qname: string, scope: Scope, attribute: boolean, where: string): [string, string] {
  const colon = qname.indexOf(':');
  if (colon < 0) return [attribute ? '' : (scope.get('') ?? ''), qname];
  const ns = scope.get(qname.slice(0, colon));
  if (ns === undefined)
    throw invalid(`Undeclared namespace prefix in '${qname}' (${where})`, 'xml.namespace', where);
  return [ns, qname.slice(colon + 1)];
}

interface Collected {
  child: JsonChild;
  values: unknown[];
  parts: (Obj | null)[];
  texts: (string | undefined)[];
}

class Reader {
  constructor(private readonly text: string) {}

  resource(x: XNode, parentScope: Scope, path: string | undefined): Obj {
    const tag = tagOf(x);
    const where = path ?? tag;
    const { scope, attrs } = scopeOf(x, parentScope, where);
    const [ns, type] = resolve(tag, scope, false, where);
    if (ns !== FHIR_NS) {
      throw invalid(
        `The element '${type}' is not in the FHIR namespace ${FHIR_NS}${ns ? ` (it is in '${ns}')` : ''}`,
        'xml.namespace',
        where,
      );
    }
    const node = isResourceType(type) ? structureNode(type) : undefined;
    if (!node) throw invalid(`Unknown resource type: ${type}`, 'xml.resource-type', where);
    const at = path ?? type;
    this.attributes(attrs, scope, new Set(), at, {});
    const obj: Obj = { resourceType: type };
    this.children(x[tag] as XNode[], scope, node, obj, at);
    return obj;
  }

  /** Checks attributes: only those in `allowed` (written into `into`) and schema hints (`xsi:`) are accepted. */
  private attributes(
    attrs: [string, string][],
    scope: Scope,
    allowed: ReadonlySet<string>,
    path: string,
    into: Obj,
  ): void {
    for (const [qname, raw] of attrs) {
      const [ns, local] = resolve(qname, scope, true, path);
      if (ns === XSI_NS) continue;
      if (ns === '' && allowed.has(local)) into[local] = attributeValue(raw, `${path}@${local}`);
      else throw invalid(`Unknown attribute '${qname}' on ${path}`, 'xml.unknown-attribute', `${path}`);
    }
  }

  private children(kids: XNode[], scope: Scope, node: StructureNode, obj: Obj, path: string): void {
    const collected = new Map<string, Collected>();
    for (const x of elements(kids, path)) {
      const tag = tagOf(x);
      const { scope: inner, attrs } = scopeOf(x, scope, path);
      const [ns, name] = resolve(tag, inner, false, path);
      const at = `${path}.${name}`;
      const child = isAttribute(node, name) ? undefined : node.json.get(name);
      if (!child) throw invalid(`Unknown element '${name}'`, 'xml.unknown-element', at);
      const isDiv = child.type === 'xhtml';
      if (ns !== (isDiv ? XHTML_NS : FHIR_NS)) {
        throw invalid(
          `The element '${name}' must be in the namespace ${isDiv ? XHTML_NS : FHIR_NS}`,
          'xml.namespace',
          at,
        );
      }
      let c = collected.get(name);
      if (!c) {
        c = { child, values: [], parts: [], texts: [] };
        collected.set(name, c);
      } else if (child.element.max <= 1) {
        throw invalid(`Element '${name}' appears more than once (max cardinality 1)`, 'xml.repeated', at);
      }
      if (isDiv) {
        c.values.push(this.div(x, tag, attrs, at));
        c.parts.push(null);
        c.texts.push(undefined);
      } else if (child.kind === 'primitive' || child.kind === 'any')
        this.primitive(x, tag, attrs, inner, child, c, at);
      else if (child.kind === 'resource') c.values.push(this.wrapped(x, tag, attrs, inner, at));
      else c.values.push(this.complex(x, tag, attrs, inner, child.node as StructureNode, at));
    }
    for (const [name, c] of collected) this.assign(obj, name, c);
  }

  private assign(obj: Obj, name: string, c: Collected): void {
    const many = c.child.element.max > 1;
    const hasValue = c.values.some((v) => v !== undefined);
    const hasPart = c.parts.some((p) => p !== null);
    if (!many) {
      if (hasValue) {
        obj[name] = c.values[0];
        const t = c.texts[0];
        if (t !== undefined) setRawNumber(obj, name, t);
      }
      if (hasPart) obj[`_${name}`] = c.parts[0];
      return;
    }
    if (hasValue) {
      const values = c.values.map((v) => (v === undefined ? null : v));
      c.texts.forEach((t, i) => {
        if (t !== undefined) setRawNumber(values, i, t);
      });
      obj[name] = values;
    }
    if (hasPart) obj[`_${name}`] = c.parts;
  }

  /** A primitive: `value` and `id` attributes, `extension` children. */
  private primitive(
    x: XNode,
    tag: string,
    attrs: [string, string][],
    scope: Scope,
    child: JsonChild,
    c: Collected,
    at: string,
  ): void {
    const found: Obj = {};
    this.attributes(attrs, scope, PRIMITIVE_ATTRS, at, found);
    const part: Obj = {};
    if (typeof found.id === 'string') part.id = found.id;
    const extension = this.extensions(x[tag] as XNode[], scope, at);
    if (extension.length) part.extension = extension;
    const raw = found.value as string | undefined;
    if (raw === undefined && part.id === undefined && extension.length === 0) {
      throw invalid(`Element '${child.element.name}' has neither a value nor extensions`, 'xml.empty', at);
    }
    const [value, text] = raw === undefined ? [undefined, undefined] : primitiveValue(child.type, raw);
    c.values.push(value);
    c.texts.push(text);
    c.parts.push(part.id !== undefined || part.extension !== undefined ? part : null);
  }

  private extensions(kids: XNode[], scope: Scope, path: string): Obj[] {
    const out: Obj[] = [];
    const ext = structureNode('Extension') as StructureNode;
    for (const x of elements(kids, path)) {
      const tag = tagOf(x);
      const { scope: inner, attrs } = scopeOf(x, scope, path);
      const [ns, name] = resolve(tag, inner, false, path);
      if (name !== 'extension' || ns !== FHIR_NS) {
        throw invalid(
          `Unknown element '${name}' (a primitive holds only extensions)`,
          'xml.unknown-element',
          `${path}.${name}`,
        );
      }
      out.push(this.complex(x, tag, attrs, inner, ext, `${path}.extension`));
    }
    return out;
  }

  /** A datatype or backbone element: `id` (and an Extension's `url`) attributes, child elements. */
  private complex(
    x: XNode,
    tag: string,
    attrs: [string, string][],
    scope: Scope,
    node: StructureNode,
    at: string,
  ): Obj {
    const obj: Obj = {};
    this.attributes(attrs, scope, node.path === 'Extension' ? EXTENSION_ATTRS : ELEMENT_ATTRS, at, obj);
    this.children(x[tag] as XNode[], scope, node, obj, at);
    return obj;
  }

  /** `contained`, `Bundle.entry.resource`, `Parameters.parameter.resource`: one element named after the type. */
  private wrapped(x: XNode, tag: string, attrs: [string, string][], scope: Scope, at: string): Obj {
    this.attributes(attrs, scope, new Set(), at, {});
    const inner = elements(x[tag] as XNode[], at);
    if (inner.length !== 1) throw invalid(`'${at}' must hold exactly one resource`, 'xml.wrapped', at);
    return this.resource(inner[0] as XNode, scope, at);
  }

  /** The narrative's XHTML, exactly as written (the JSON form is that text). */
  private div(x: XNode, tag: string, attrs: [string, string][], at: string): string {
    if (tag !== 'div') throw invalid(`Write the narrative as <div xmlns="${XHTML_NS}">`, 'xml.div', at);
    const meta = (x as Record<string, unknown>)[META] as
      { startIndex?: number; endIndex?: number } | undefined;
    if (meta?.startIndex === undefined || meta.endIndex === undefined) {
      throw invalid('The narrative could not be read', 'xml.div', at);
    }
    const raw = this.text.slice(meta.startIndex, meta.endIndex);
    // Declared on an ancestor: the JSON form declares it on the div itself.
    return !/^<div[^>]*\sxmlns\s*=/.test(raw) ? `<div xmlns="${XHTML_NS}"${raw.slice(4)}` : raw;
  }
}

const PRIMITIVE_ATTRS: ReadonlySet<string> = new Set(['value', 'id']);
const ELEMENT_ATTRS: ReadonlySet<string> = new Set(['id']);
const EXTENSION_ATTRS: ReadonlySet<string> = new Set(['id', 'url']);

const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/**
 * The JSON value of a primitive's `value` attribute: booleans and numbers as JSON has them (a number's text when its
 * JS form differs, e.g. `1.50`), everything else a string. A value that is not of its type stays a string, and
 * validation refuses it as it refuses the same JSON.
 */
function primitiveValue(type: string, raw: string): [unknown, string | undefined] {
  if (type === 'boolean') return [raw === 'true' ? true : raw === 'false' ? false : raw, undefined];
  if (NUMBER_TYPES.has(type) && JSON_NUMBER.test(raw)) {
    const n = Number(raw);
    return [n, String(n) === raw ? undefined : raw];
  }
  return [raw, undefined];
}
