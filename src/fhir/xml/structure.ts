// What the FHIR XML format (https://hl7.org/fhir/R4/xml.html) needs to know of a structure beyond what JSON does: the
// order of its elements (XML requires the definition's order), which of them are XML attributes (`Element.id` on
// datatypes and backbone elements, `Extension.url`), and the namespaces. Built once per structure, lazily.
import type { JsonChild, StructureNode } from '../definitions/index.js';

export const FHIR_NS = 'http://hl7.org/fhir';
export const XHTML_NS = 'http://www.w3.org/1999/xhtml';

/** One JSON property of a structure, in the order of its element in the definition. */
export interface OrderedChild {
  readonly name: string;
  readonly child: JsonChild;
}

const orders = new WeakMap<StructureNode, readonly OrderedChild[]>();

/**
 * The JSON properties of `node` that are XML elements, in definition order (a choice's variants at the choice's
 * place). `id` of a datatype or backbone element and `url` of an Extension are attributes, so left out.
 */
export function orderedChildren(node: StructureNode): readonly OrderedChild[] {
  const known = orders.get(node);
  if (known) return known;
  const out: OrderedChild[] = [];
  for (const el of node.elements.values()) {
    if (isAttribute(node, el.name)) continue;
    const names = el.isChoice
      ? el.types.map((t) => el.name + t.charAt(0).toUpperCase() + t.slice(1))
      : [el.name];
    for (const name of names) {
      const child = node.json.get(name);
      if (child && child.element === el) out.push({ name, child });
    }
  }
  orders.set(node, out);
  return out;
}

/** Whether the JSON property `name` of `node` is an XML attribute (`Element.id`, `Extension.url`). */
export function isAttribute(node: StructureNode, name: string): boolean {
  return (name === 'id' && !node.isResource) || (name === 'url' && node.path === 'Extension');
}

/** JSON numbers among the primitive types (https://hl7.org/fhir/R4/json.html#primitive). */
export const NUMBER_TYPES: ReadonlySet<string> = new Set([
  'integer',
  'positiveInt',
  'unsignedInt',
  'decimal',
]);
