// The element type information the index extractor walks: HL7's R4 model as shipped with the `fhirpath`
// package, plus the service resource types (Project, ProjectMembership, ...) read from Medplum's published
// StructureDefinitions and R5's SubscriptionTopic. https://hl7.org/fhir/R4/elementdefinition.html
import { readSlimBundle } from '../definitions/slim.js';
import r4 from 'fhirpath/fhir-context/r4';
import { MEDPLUM_RESOURCE_TYPES } from '../definitions/index.js';
import { SUBSCRIPTION_TOPIC_SD } from '../definitions/subscription-topic.js';

/** The resource types that are not R4 but that Cinder stores and searches (Medplum's service types, SubscriptionTopic). */
export const SERVICE_TYPES = MEDPLUM_RESOURCE_TYPES;

export interface ElementInfo {
  /** The element's possible FHIR types (one unless it is a choice element `value[x]`). */
  types: string[];
  choice: boolean;
  /** The model path under which the element's children are found (a backbone path or a type name). */
  childPath: (type: string) => string;
}

interface ExtraModel {
  path2Type: Map<string, string>;
  choice: Map<string, string[]>;
  elsewhere: Map<string, string>;
}

const PRIMITIVES = new Set([
  'boolean',
  'integer',
  'string',
  'decimal',
  'uri',
  'url',
  'canonical',
  'base64Binary',
  'instant',
  'date',
  'dateTime',
  'time',
  'code',
  'oid',
  'id',
  'markdown',
  'unsignedInt',
  'positiveInt',
  'uuid',
  'xhtml',
  'integer64',
]);

/** `DateTime` (a choice suffix) → `dateTime`; complex types keep their capital. */
export function typeFromSuffix(suffix: string): string {
  const lower = suffix.charAt(0).toLowerCase() + suffix.slice(1);
  return PRIMITIVES.has(lower) ? lower : suffix;
}

/** `dateTime` → `DateTime`, the JSON property suffix of a choice element. */
export function suffixOf(type: string): string {
  return type.charAt(0).toUpperCase() + type.slice(1);
}

export function isPrimitive(type: string): boolean {
  return PRIMITIVES.has(type);
}

function normaliseTypeName(t: string): string {
  if (t.startsWith('System.') || t.startsWith('http://hl7.org/fhirpath/System.')) {
    const s = t.slice(t.lastIndexOf('.') + 1);
    return s === 'String' ? 'string' : typeFromSuffix(s);
  }
  return t;
}

let extra: ExtraModel | undefined;

interface ElementDefinitionJson {
  path: string;
  type?: { code: string }[];
  contentReference?: string;
}

function extraModel(): ExtraModel {
  if (extra) return extra;
  const m: ExtraModel = { path2Type: new Map(), choice: new Map(), elsewhere: new Map() };
  const bundle = readSlimBundle('profiles-medplum.json') as unknown as {
    entry: { resource: { name: string; kind: string; snapshot?: { element: ElementDefinitionJson[] } } }[];
  };
  const sds = [...bundle.entry.map((e) => e.resource), SUBSCRIPTION_TOPIC_SD];
  for (const sd of sds) {
    if (!SERVICE_TYPES.includes(sd.name) && sd.kind !== 'complex-type') continue;
    for (const el of sd.snapshot?.element ?? []) {
      if (!el.path.includes('.')) continue;
      if (el.contentReference) {
        m.elsewhere.set(el.path, el.contentReference.replace(/^.*#/, ''));
        continue;
      }
      const codes = (el.type ?? []).map((t) => normaliseTypeName(t.code));
      if (el.path.endsWith('[x]')) {
        m.choice.set(el.path.slice(0, -3), codes.map(suffixOf));
      } else if (codes[0]) {
        m.path2Type.set(el.path, codes[0]);
      }
    }
  }
  extra = m;
  return m;
}

const resourceTypeSet = new Set<string>();

/** Every resource type Cinder knows: the R4 resources and the service types. */
export function resourceTypes(): ReadonlySet<string> {
  if (resourceTypeSet.size === 0) {
    for (const t of Object.keys(r4.type2Parent)) {
      let p: string | undefined = t;
      while (p && p !== 'Resource' && p !== 'DomainResource') p = r4.type2Parent[p];
      if (p && t !== 'DomainResource' && t !== 'Resource') resourceTypeSet.add(t);
    }
    for (const t of SERVICE_TYPES) resourceTypeSet.add(t);
  }
  return resourceTypeSet;
}

export function isResourceType(t: string): boolean {
  return resourceTypes().has(t);
}

/** True when `type` is `base` or derives from it (`Age` is a `Quantity`). */
export function isTypeOf(type: string, base: string): boolean {
  let t: string | undefined = type;
  for (let i = 0; t && i < 10; i++) {
    if (t === base) return true;
    t = r4.type2Parent[t];
  }
  return false;
}

const BACKBONE = new Set(['BackboneElement', 'Element']);

/** Type information of the child `name` of the element at model path `parent` (a type name or backbone path). */
export function elementInfo(parent: string, name: string): ElementInfo | undefined {
  const x = extraModel();
  let path = `${parent}.${name}`;
  path = r4.pathsDefinedElsewhere[path] ?? x.elsewhere.get(path) ?? path;
  const choice = r4.choiceTypePaths[path] ?? x.choice.get(path);
  if (choice) {
    return { types: choice.map(typeFromSuffix), choice: true, childPath: (t) => t };
  }
  const raw = r4.path2Type[path] ?? x.path2Type.get(path);
  if (!raw) return undefined;
  const type = normaliseTypeName(raw);
  const backbone = BACKBONE.has(type);
  return { types: [type], choice: false, childPath: (t) => (backbone ? path : t) };
}
