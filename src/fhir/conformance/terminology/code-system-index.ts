// A CodeSystem compiled for lookups (https://hl7.org/fhir/R4/codesystem.html): its nested `concept`s flattened, the
// hierarchy taken from nesting and from the `parent`/`child`/`subsumedBy` properties
// (https://hl7.org/fhir/R4/codesystem-concept-properties.html), with descendants and ancestors precomputed so that
// `is-a`, `below` and `above` never walk the whole code system per request. Built once per stored version (cache.ts).
import type { Resource } from '../../types.js';

type Json = Record<string, unknown>;

export interface ConceptProperty {
  code: string;
  /** The `value[x]` element's name (valueCode, valueString, …) and value. */
  type: string;
  value: unknown;
}

export interface Concept {
  code: string;
  display?: string;
  definition?: string;
  designations: Json[];
  properties: ConceptProperty[];
  /** Not for current use: its `inactive` property is true, or its `status` is retired or inactive. */
  inactive?: true;
}

export interface CodeSystemIndex {
  url: string;
  version?: string;
  name?: string;
  /** CodeSystem.content: `not-present` has no concepts to expand. */
  content?: string;
  caseSensitive: boolean;
  concepts: readonly Concept[];
  /** Concept position by code (lower-cased too when the code system is not case-sensitive). */
  find(code: string): number | undefined;
  parents(i: number): readonly number[];
  children(i: number): readonly number[];
  /** Every concept below `i` (not `i` itself), each once. */
  descendants(i: number): readonly number[];
  /** Every concept above `i` (not `i` itself), each once. */
  ancestors(i: number): readonly number[];
  /** Whether `a` is `b` or one of its ancestors. */
  subsumes(a: number, b: number): boolean;
}

/** `status` values of concepts not for current use (https://hl7.org/fhir/R4/codesystem-concept-properties.html). */
const INACTIVE = new Set(['retired', 'inactive']);
/** Walks of a polyhierarchy remembered per index. */
const MEMO = 1024;
const HIERARCHY_UP = new Set(['parent', 'subsumedBy']);

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

function propertiesOf(c: Json): ConceptProperty[] {
  const list = Array.isArray(c.property) ? c.property : [];
  const out: ConceptProperty[] = [];
  for (const p of list) {
    if (!isObject(p) || typeof p.code !== 'string') continue;
    const key = Object.keys(p).find((k) => k.startsWith('value'));
    if (key) out.push({ code: p.code, type: key, value: p[key] });
  }
  return out;
}

/** The concepts in document order (a pre-order walk, iterative: nesting depth costs no stack) and nesting parents. */
function flatten(top: unknown): { concepts: Concept[]; nestedParent: number[] } {
  const concepts: Concept[] = [];
  const nestedParent: number[] = [];
  const stack: { list: unknown[]; at: number; parent: number }[] = [];
  if (Array.isArray(top)) stack.push({ list: top, at: 0, parent: -1 });
  while (stack.length > 0) {
    const frame = stack[stack.length - 1] as (typeof stack)[number];
    if (frame.at >= frame.list.length) {
      stack.pop();
      continue;
    }
    const c = frame.list[frame.at++];
    if (!isObject(c) || typeof c.code !== 'string') continue;
    const display = str(c.display);
    const definition = str(c.definition);
    const properties = propertiesOf(c);
    const inactive = properties.some(
      (p) =>
        (p.code === 'inactive' && p.value === true) || (p.code === 'status' && INACTIVE.has(String(p.value))),
    );
    concepts.push({
      code: c.code,
      ...(display !== undefined ? { display } : {}),
      ...(definition !== undefined ? { definition } : {}),
      designations: Array.isArray(c.designation) ? c.designation.filter(isObject) : [],
      properties,
      ...(inactive ? { inactive: true as const } : {}),
    });
    nestedParent.push(frame.parent);
    if (Array.isArray(c.concept)) stack.push({ list: c.concept, at: 0, parent: concepts.length - 1 });
  }
  return { concepts, nestedParent };
}

/** Parent and child lists (each edge once) from nesting and from the hierarchy properties. */
function edges(
  concepts: Concept[],
  nestedParent: number[],
  find: (code: string) => number | undefined,
): { up: number[][]; down: number[][] } {
  const up: number[][] = concepts.map(() => []);
  const down: number[][] = concepts.map(() => []);
  const seen = new Set<string>();
  const link = (child: number, parent: number): void => {
    if (child === parent || seen.has(`${child} ${parent}`)) return;
    seen.add(`${child} ${parent}`);
    (up[child] as number[]).push(parent);
    (down[parent] as number[]).push(child);
  };
  concepts.forEach((c, i) => {
    const nested = nestedParent[i] as number;
    if (nested >= 0) link(i, nested);
    for (const p of c.properties) {
      const target = typeof p.value === 'string' ? find(p.value) : undefined;
      if (target === undefined) continue;
      if (HIERARCHY_UP.has(p.code)) link(i, target);
      else if (p.code === 'child') link(target, i);
    }
  });
  return { up, down };
}

/**
 * Pre-order numbering of a forest: `order[k]` is the concept numbered k and concept i's descendants are
 * order[start[i] + 1 .. end[i]). undefined when the hierarchy is not a forest (a concept with two parents, a cycle).
 */
function numbering(
  up: number[][],
  down: number[][],
): { order: number[]; start: number[]; end: number[] } | undefined {
  const n = up.length;
  if (up.some((p) => p.length > 1)) return undefined;
  const order: number[] = [];
  const start = new Array<number>(n).fill(-1);
  const end = new Array<number>(n).fill(-1);
  for (let root = 0; root < n; root++) {
    if ((up[root] as number[]).length > 0) continue;
    const stack: { node: number; next: number }[] = [{ node: root, next: 0 }];
    start[root] = order.push(root) - 1;
    while (stack.length > 0) {
      const top = stack[stack.length - 1] as { node: number; next: number };
      const kids = down[top.node] as number[];
      if (top.next >= kids.length) {
        end[top.node] = order.length;
        stack.pop();
        continue;
      }
      const kid = kids[top.next++] as number;
      start[kid] = order.push(kid) - 1;
      stack.push({ node: kid, next: 0 });
    }
  }
  // Concepts never reached from a root sit on a cycle.
  return order.length === n ? { order, start, end } : undefined;
}

/** Every node reachable from `from` along `next` (breadth first, each once, `from` excluded). */
function reach(from: number, next: number[][]): number[] {
  const seen = new Set<number>([from]);
  const out: number[] = [];
  const queue = [from];
  for (let k = 0; k < queue.length; k++) {
    for (const m of next[queue[k] as number] as number[]) {
      if (seen.has(m)) continue;
      seen.add(m);
      out.push(m);
      queue.push(m);
    }
  }
  return out;
}

export function buildCodeSystemIndex(cs: Resource): CodeSystemIndex {
  const { concepts, nestedParent } = flatten(cs.concept);
  const caseSensitive = cs.caseSensitive !== false;
  const byCode = new Map<string, number>();
  concepts.forEach((c, i) => {
    if (!byCode.has(c.code)) byCode.set(c.code, i);
    if (!caseSensitive && !byCode.has(c.code.toLowerCase())) byCode.set(c.code.toLowerCase(), i);
  });
  const find = (code: string): number | undefined =>
    byCode.get(code) ?? (caseSensitive ? undefined : byCode.get(code.toLowerCase()));
  const { up, down } = edges(concepts, nestedParent, find);
  const tree = numbering(up, down);
  // A polyhierarchy (or a cycle) is walked per concept, and the last MEMO walks remembered (bounded memory).
  const below = new Map<number, number[]>();
  const above = new Map<number, number[]>();
  const memo = (m: Map<number, number[]>, i: number, next: number[][]): number[] => {
    let r = m.get(i);
    if (r) return r;
    if (m.size >= MEMO) m.clear();
    m.set(i, (r = reach(i, next)));
    return r;
  };
  const descendants = (i: number): readonly number[] =>
    tree ? tree.order.slice((tree.start[i] as number) + 1, tree.end[i] as number) : memo(below, i, down);
  const ancestors = (i: number): readonly number[] => memo(above, i, up);
  const subsumes = (a: number, b: number): boolean => {
    if (a === b) return true;
    if (tree)
      return (
        (tree.start[a] as number) < (tree.start[b] as number) &&
        (tree.start[b] as number) < (tree.end[a] as number)
      );
    return ancestors(b).includes(a);
  };
  const version = str(cs.version);
  const name = str(cs.name) ?? str(cs.title);
  const content = str(cs.content);
  return {
    url: str(cs.url) ?? '',
    ...(version !== undefined ? { version } : {}),
    ...(name !== undefined ? { name } : {}),
    ...(content !== undefined ? { content } : {}),
    caseSensitive,
    concepts,
    find,
    parents: (i) => up[i] as number[],
    children: (i) => down[i] as number[],
    descendants,
    ancestors,
    subsumes,
  };
}
