// FHIR JSON → FHIR XML (https://hl7.org/fhir/R4/xml.html): elements in definition order, primitives as `value`
// attributes (with their `_name` id and extensions), arrays as repeated elements, nested resources wrapped in an
// element named after their type, the narrative `div` as XHTML. Decimals keep the text they were written with.
import { structureNode, type JsonChild, type StructureNode } from '../definitions/index.js';
import { numberText } from '../json/raw-numbers.js';
import { isWellFormedElement } from './well-formed.js';
import { FHIR_NS, XHTML_NS, orderedChildren } from './structure.js';

type Obj = Record<string, unknown>;

// Characters that must be written as references in an attribute value: markup, quotes, and whitespace other than the
// space (a parser would turn literal tabs and newlines into spaces, https://www.w3.org/TR/xml/#AVNormalize). Controls
// that XML 1.0 cannot carry at all are replaced by U+FFFD.
// eslint-disable-next-line no-control-regex
const ATTR_SPECIAL = /[&<>"\u0000-\u001f]/;
// eslint-disable-next-line no-control-regex
const ATTR_SPECIAL_ALL = /[&<>"\u0000-\u001f]/g;
// eslint-disable-next-line no-control-regex
const TEXT_SPECIAL_ALL = /[&<>\u0000-\u0008\u000b\u000c\u000e-\u001f]/g;

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  '\t': '&#9;',
  '\n': '&#10;',
  '\r': '&#13;',
};

export function escapeAttribute(text: string): string {
  if (!ATTR_SPECIAL.test(text)) return text;
  return text.replace(ATTR_SPECIAL_ALL, (c) => ESCAPES[c] ?? '\ufffd');
}

function escapeText(text: string): string {
  return text.replace(TEXT_SPECIAL_ALL, (c) => ESCAPES[c] ?? '\ufffd');
}

/** The FHIR XML of a resource, with an XML declaration. */
export function toXml(resource: object): string {
  const out: string[] = ['<?xml version="1.0" encoding="UTF-8"?>'];
  writeResource(out, resource as Obj, true);
  return out.join('');
}

function writeResource(out: string[], resource: Obj, root: boolean): void {
  const type = typeof resource.resourceType === 'string' ? resource.resourceType : undefined;
  const node = type ? structureNode(type) : undefined;
  if (!type || !node?.isResource || !/^[A-Za-z]+$/.test(type)) {
    // Never produced by Cinder (every stored resource has a known type); written as an empty OperationOutcome-free
    // element rather than an invalid document.
    out.push(`<Resource${root ? ` xmlns="${FHIR_NS}"` : ''}/>`);
    return;
  }
  out.push(root ? `<${type} xmlns="${FHIR_NS}">` : `<${type}>`);
  writeChildren(out, node, resource);
  out.push(`</${type}>`);
}

function writeChildren(out: string[], node: StructureNode, obj: Obj): void {
  for (const { name, child } of orderedChildren(node)) {
    const value = obj[name];
    const part = child.kind === 'primitive' || child.kind === 'any' ? obj[`_${name}`] : undefined;
    if (value === undefined && part === undefined) continue;
    if (Array.isArray(value) || Array.isArray(part)) {
      const values = Array.isArray(value) ? (value as unknown[]) : [];
      const parts = Array.isArray(part) ? (part as unknown[]) : [];
      const n = Math.max(values.length, parts.length);
      for (let i = 0; i < n; i++) writeOne(out, name, child, values, i, values[i], parts[i]);
    } else writeOne(out, name, child, obj, name, value, part);
  }
}

function writeOne(
  out: string[],
  name: string,
  child: JsonChild,
  holder: object,
  key: string | number,
  value: unknown,
  part: unknown,
): void {
  if (child.kind === 'primitive' || child.kind === 'any') {
    if (child.type === 'xhtml') {
      if (typeof value === 'string') out.push(xhtml(value));
      return;
    }
    writePrimitive(out, name, holder, key, value, part);
  } else if (child.kind === 'resource') {
    if (value === null || typeof value !== 'object') return;
    out.push(`<${name}>`);
    writeResource(out, value as Obj, false);
    out.push(`</${name}>`);
  } else if (value !== null && typeof value === 'object' && child.node) {
    writeComplex(out, name, child.node, value as Obj);
  }
}

function writePrimitive(
  out: string[],
  name: string,
  holder: object,
  key: string | number,
  value: unknown,
  part: unknown,
): void {
  const p = part !== null && typeof part === 'object' ? (part as Obj) : undefined;
  let open = `<${name}`;
  if (typeof p?.id === 'string') open += ` id="${escapeAttribute(p.id)}"`;
  if (value !== undefined && value !== null) {
    const text = typeof value === 'number' ? (numberText(holder, key) ?? String(value)) : String(value);
    open += ` value="${escapeAttribute(text)}"`;
  }
  const extensions = p?.extension;
  if (Array.isArray(extensions) && extensions.length > 0) {
    out.push(`${open}>`);
    writeExtensions(out, extensions);
    out.push(`</${name}>`);
  } else out.push(`${open}/>`);
}

function writeExtensions(out: string[], extensions: unknown[]): void {
  const node = structureNode('Extension') as StructureNode;
  for (const e of extensions) {
    if (e !== null && typeof e === 'object') writeComplex(out, 'extension', node, e as Obj);
  }
}

function writeComplex(out: string[], name: string, node: StructureNode, obj: Obj): void {
  let open = `<${name}`;
  if (typeof obj.id === 'string') open += ` id="${escapeAttribute(obj.id)}"`;
  if (node.path === 'Extension' && typeof obj.url === 'string') open += ` url="${escapeAttribute(obj.url)}"`;
  const start = out.length;
  out.push(`${open}>`);
  writeChildren(out, node, obj);
  if (out.length === start + 1) out[start] = `${open}/>`;
  else out.push(`</${name}>`);
}

/**
 * The narrative's XHTML as it is when it is one well-formed `div` (every narrative Cinder keeps from an XML body, and
 * those of well-behaved JSON clients), declared in the XHTML namespace. Anything else is written as the text of an
 * XHTML `div`, so that no narrative can add elements to the FHIR document around it.
 */
function xhtml(div: string): string {
  const trimmed = div.trim();
  if (/^<div[\s>/]/.test(trimmed) && isWellFormedElement(trimmed)) {
    return /^<div[^>]*\sxmlns\s*=/.test(trimmed) ? trimmed : `<div xmlns="${XHTML_NS}"${trimmed.slice(4)}`;
  }
  return `<div xmlns="${XHTML_NS}">${escapeText(div)}</div>`;
}
