// Compiles a StructureDefinition's snapshot into a tree of element nodes (children by name, slices in order), the
// shape the validator walks. https://hl7.org/fhir/R4/elementdefinition.html and https://hl7.org/fhir/R4/profiling.html
import type { Resource } from '../../types.js';

export interface TypeRef {
  code: string;
  profiles: string[];
  /** targetProfile: what a Reference or canonical may point to. */
  targets: string[];
}

export interface Constraint {
  key: string;
  severity: 'error' | 'warning';
  human: string;
  expression: string;
}

export interface Discriminator {
  type: 'value' | 'pattern' | 'type' | 'profile' | 'exists';
  path: string;
}

export interface Slicing {
  discriminators: Discriminator[];
  rules: 'closed' | 'open' | 'openAtEnd';
  ordered: boolean;
}

export interface ElementNode {
  id: string;
  /** The element's path without slice names, e.g. `Observation.component.code`. */
  path: string;
  /** The last path segment, e.g. `value[x]`. */
  name: string;
  min: number;
  max: number;
  types: TypeRef[];
  fixed?: unknown;
  pattern?: unknown;
  binding?: { strength: string; valueSet: string };
  constraints: Constraint[];
  slicing?: Slicing;
  sliceName?: string;
  slices: ElementNode[];
  children: Map<string, ElementNode>;
}

export interface CompiledProfile {
  url: string;
  /** The type it constrains (StructureDefinition.type). */
  type: string;
  root: ElementNode;
}

/** Snapshots larger than this are refused (a hostile profile), see index.ts. */
export const MAX_SNAPSHOT_ELEMENTS = 20_000;

export class ProfileCompileError extends Error {}

type Raw = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** The value of the first key of `e` starting with `prefix` (`fixedCode`, `patternCodeableConcept`). */
function prefixed(e: Raw, prefix: string): unknown {
  for (const k of Object.keys(e)) if (k.startsWith(prefix) && k.length > prefix.length) return e[k];
  return undefined;
}

function typesOf(e: Raw): TypeRef[] {
  const list = Array.isArray(e.type) ? (e.type as Raw[]) : [];
  return list.flatMap((t) => {
    const code = str(t?.code);
    if (!code) return [];
    const strings = (v: unknown): string[] =>
      Array.isArray(v) ? v.filter((p): p is string => typeof p === 'string') : [];
    return [
      {
        code: code.startsWith('http://hl7.org/fhirpath/System.') ? 'string' : code,
        profiles: strings(t.profile),
        targets: strings(t.targetProfile),
      },
    ];
  });
}

function constraintsOf(e: Raw): Constraint[] {
  const list = Array.isArray(e.constraint) ? (e.constraint as Raw[]) : [];
  return list.flatMap((c) => {
    const expression = str(c?.expression);
    if (!expression) return [];
    return [
      {
        key: str(c.key) ?? '?',
        severity: c.severity === 'warning' ? ('warning' as const) : ('error' as const),
        human: str(c.human) ?? '',
        expression,
      },
    ];
  });
}

function slicingOf(e: Raw): Slicing | undefined {
  const s = e.slicing as Raw | undefined;
  if (!s || typeof s !== 'object') return undefined;
  const list = Array.isArray(s.discriminator) ? (s.discriminator as Raw[]) : [];
  const discriminators = list.flatMap((d): Discriminator[] => {
    const type = str(d?.type);
    const path = str(d?.path);
    return type && path && ['value', 'pattern', 'type', 'profile', 'exists'].includes(type)
      ? [{ type: type as Discriminator['type'], path }]
      : [];
  });
  const rules = s.rules === 'closed' || s.rules === 'openAtEnd' ? s.rules : 'open';
  return { discriminators, rules, ordered: s.ordered === true };
}

function nodeOf(e: Raw, id: string, path: string): ElementNode {
  const max = str(e.max);
  const binding = e.binding as Raw | undefined;
  const valueSet = str(binding?.valueSet);
  const strength = str(binding?.strength);
  const node: ElementNode = {
    id,
    path,
    name: path.slice(path.lastIndexOf('.') + 1),
    min: typeof e.min === 'number' ? e.min : 0,
    max: max === undefined || max === '*' ? Infinity : Number(max),
    types: typesOf(e),
    constraints: constraintsOf(e),
    slices: [],
    children: new Map(),
  };
  const fixed = prefixed(e, 'fixed');
  const pattern = prefixed(e, 'pattern');
  if (fixed !== undefined) node.fixed = fixed;
  if (pattern !== undefined) node.pattern = pattern;
  if (valueSet && strength) node.binding = { strength, valueSet };
  const slicing = slicingOf(e);
  if (slicing) node.slicing = slicing;
  const sliceName = str(e.sliceName);
  if (sliceName) node.sliceName = sliceName;
  return node;
}

/** Where an element id hangs: its parent's id, and for a slice the id of the element it slices. */
function placeOf(id: string): { parent: string; sliced?: string } {
  // Slice names are taken to hold no dot (true of the R4 and US Core snapshots).
  const cut = id.lastIndexOf('.');
  const parent = id.slice(0, cut);
  const last = id.slice(cut + 1);
  const colon = last.indexOf(':');
  if (colon < 0) return { parent };
  const slice = last.slice(colon + 1);
  const slash = slice.lastIndexOf('/');
  const base = slash < 0 ? last.slice(0, colon) : `${last.slice(0, colon)}:${slice.slice(0, slash)}`;
  return { parent, sliced: `${parent}.${base}` };
}

/** Compiles a StructureDefinition with a snapshot; throws ProfileCompileError when it cannot be used. */
export function compileProfile(sd: Resource): CompiledProfile {
  const snapshot = (sd.snapshot as Raw | undefined)?.element;
  if (!Array.isArray(snapshot) || snapshot.length === 0) throw new ProfileCompileError('it has no snapshot');
  if (snapshot.length > MAX_SNAPSHOT_ELEMENTS)
    throw new ProfileCompileError(`its snapshot has more than ${MAX_SNAPSHOT_ELEMENTS} elements`);
  const byId = new Map<string, ElementNode>();
  let root: ElementNode | undefined;
  for (const raw of snapshot as Raw[]) {
    const path = str(raw?.path);
    if (!path) continue;
    const id = str(raw.id) ?? path;
    const node = nodeOf(raw, id, path);
    if (!root) {
      root = node;
      byId.set(id, node);
      continue;
    }
    const { parent, sliced } = placeOf(id);
    if (sliced !== undefined) byId.get(sliced)?.slices.push(node);
    else byId.get(parent)?.children.set(node.name, node);
    byId.set(id, node);
  }
  if (!root) throw new ProfileCompileError('its snapshot has no root element');
  const url = str(sd.url) ?? '';
  return { url, type: str(sd.type) ?? root.path, root };
}
