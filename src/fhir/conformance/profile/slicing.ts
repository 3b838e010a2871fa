// Slicing (https://hl7.org/fhir/R4/profiling.html#slicing): which slice an item belongs to by the discriminators
// `value`, `pattern`, `type`, `profile` and `exists`, evaluated on the item along the discriminator's path
// (names, `$this`, `extension('url')`, `ofType(T)`; `resolve()` is not followed: such a discriminator never matches).
import type { CompiledProfile, Discriminator, ElementNode } from './compile.js';
import { choiceType, containsPattern, equalJson, isObject, typeOfItem, type Item } from './values.js';

/** What slicing needs from the walk: profiles by canonical, and whether an item conforms to one. */
export interface SliceEnv {
  profile(canonical: string): CompiledProfile | undefined;
  conforms(profile: CompiledProfile, item: Item): boolean;
}

type Step =
  | { kind: 'this' }
  | { kind: 'name'; name: string }
  | { kind: 'extension'; url: string }
  | { kind: 'ofType'; type: string }
  | { kind: 'unsupported' };

const pathCache = new Map<string, Step[]>();

/** Splits a discriminator path into steps (dots inside parentheses or quotes do not split). */
export function stepsOf(path: string): Step[] {
  const hit = pathCache.get(path);
  if (hit) return hit;
  const parts: string[] = [];
  let depth = 0;
  let quote = false;
  let start = 0;
  for (let i = 0; i < path.length; i++) {
    const c = path[i];
    if (c === "'" || c === '"') quote = !quote;
    else if (!quote && c === '(') depth++;
    else if (!quote && c === ')') depth--;
    else if (!quote && depth === 0 && c === '.') {
      parts.push(path.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(path.slice(start));
  const steps = parts.map((p): Step => {
    const t = p.trim();
    if (t === '$this') return { kind: 'this' };
    const ext = /^extension\(\s*['"](.*)['"]\s*\)$/.exec(t);
    if (ext) return { kind: 'extension', url: ext[1] ?? '' };
    const of = /^ofType\(\s*([A-Za-z]+)\s*\)$/.exec(t);
    if (of) return { kind: 'ofType', type: of[1] ?? '' };
    return /^[A-Za-z][A-Za-z0-9_]*$/.test(t) ? { kind: 'name', name: t } : { kind: 'unsupported' };
  });
  if (pathCache.size > 1000) pathCache.clear();
  pathCache.set(path, steps);
  return steps;
}

/** The values at a discriminator path from an item. */
function valuesAt(item: Item, steps: Step[]): Item[] | undefined {
  let current: Item[] = [item];
  for (const s of steps) {
    if (s.kind === 'unsupported') return undefined;
    if (s.kind === 'this') continue;
    const next: Item[] = [];
    for (const c of current) {
      const v = c.value;
      if (!isObject(v)) continue;
      if (s.kind === 'ofType') {
        if (typeOfItem(c, []) === s.type) next.push(c);
      } else if (s.kind === 'extension') {
        const list = Array.isArray(v.extension) ? (v.extension as unknown[]) : [];
        for (const e of list)
          if (isObject(e) && e.url === s.url) next.push({ value: e, key: 'extension', path: '' });
      } else if (v[s.name] !== undefined) {
        for (const x of [v[s.name]].flat()) next.push({ value: x, key: s.name, path: '' });
      } else {
        for (const k of Object.keys(v)) {
          const type = choiceType(s.name, k);
          if (type) for (const x of [v[k]].flat()) next.push({ value: x, key: k, type, path: '' });
        }
      }
    }
    current = next;
  }
  return current;
}

/** The choice element a typed name stands for (`valueQuantity` → `value[x]`). */
function choiceChild(node: ElementNode, name: string): ElementNode | undefined {
  for (const [key, child] of node.children)
    if (key.endsWith('[x]') && choiceType(key.slice(0, -3), name) !== undefined) return child;
  return undefined;
}

/** The element definition inside a slice at a discriminator path. */
function nodeAt(slice: ElementNode, steps: Step[]): ElementNode | undefined {
  let node: ElementNode | undefined = slice;
  for (const s of steps) {
    if (!node) return undefined;
    if (s.kind === 'this' || s.kind === 'ofType') continue;
    if (s.kind === 'unsupported') return undefined;
    if (s.kind === 'extension') {
      const ext = node.children.get('extension');
      node = ext?.slices.find((x) => x.types.some((t) => t.profiles.includes(s.url)));
    } else node = node.children.get(s.name) ?? node.children.get(`${s.name}[x]`) ?? choiceChild(node, s.name);
  }
  return node;
}

function matchesValue(
  d: Discriminator,
  steps: Step[],
  values: Item[],
  slice: ElementNode,
  sub: ElementNode | undefined,
): boolean {
  if (sub?.fixed !== undefined) return values.some((v) => equalJson(v.value, sub.fixed));
  if (sub?.pattern !== undefined) return values.some((v) => containsPattern(v.value, sub.pattern));
  // An extension slice often only names its definition (type.profile): its `url` is that definition's url.
  if (!sub && d.path === 'url' && steps.length === 1) {
    const urls = slice.types.flatMap((t) => t.profiles);
    return values.some((v) => typeof v.value === 'string' && urls.includes(v.value));
  }
  return false;
}

function matches(env: SliceEnv, d: Discriminator, item: Item, slice: ElementNode): boolean {
  const steps = stepsOf(d.path);
  const values = valuesAt(item, steps);
  if (!values) return false;
  const sub = nodeAt(slice, steps);
  switch (d.type) {
    case 'value':
    case 'pattern':
      return matchesValue(d, steps, values, slice, sub);
    case 'exists':
      if (!sub) return false;
      if (sub.min >= 1) return values.length > 0;
      if (sub.max === 0) return values.length === 0;
      return true;
    case 'type': {
      const allowed = (sub ?? slice).types.map((t) => t.code);
      return values.length > 0 && values.every((v) => allowed.includes(typeOfItem(v, []) ?? ''));
    }
    case 'profile': {
      const canonicals = (sub ?? slice).types.flatMap((t) => t.profiles);
      return (
        values.length > 0 &&
        values.every((v) =>
          canonicals.some((c) => {
            const p = env.profile(c);
            return p !== undefined && env.conforms(p, v);
          }),
        )
      );
    }
  }
}

/** The index of the first slice of `node` that `item` belongs to, or -1. */
export function sliceOf(env: SliceEnv, node: ElementNode, item: Item): number {
  const discriminators = node.slicing?.discriminators ?? [];
  if (discriminators.length === 0) return -1;
  return node.slices.findIndex((s) => discriminators.every((d) => matches(env, d, item, s)));
}

/** Whether every discriminator of a slicing can be evaluated here (not `resolve()`, and at least one). */
export function decidable(node: ElementNode): boolean {
  const list = node.slicing?.discriminators ?? [];
  return list.length > 0 && list.every((d) => stepsOf(d.path).every((s) => s.kind !== 'unsupported'));
}
