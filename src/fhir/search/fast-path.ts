// A small evaluator for the path expressions most R4 search parameters use (`A.b.c`, `.where(resolve() is X)`,
// `.where(system='phone')`, `(A.b as T)`, `.as(T)`, `.ofType(T)`, `[n]`), on plain JSON with the element types
// of the R4 model. Anything else falls back to HL7's fhirpath engine (see extract.ts); a test checks both agree
// on every HL7 example. https://hl7.org/fhir/R4/fhirpath.html
import { elementInfo, isTypeOf, suffixOf } from './model.js';
import { rawNumberText } from '../json/raw-numbers.js';
import { referenceParts } from './normalise.js';

/** A value found in a resource together with its FHIR type (`HumanName`, `dateTime`, `Reference`, ...). */
export interface TypedValue {
  type: string;
  value: unknown;
  /** A number's text as written when it differs from its JS form (`1.50`): see src/fhir/json/raw-numbers.ts. */
  raw?: string;
}

export type Evaluator = (resource: Record<string, unknown>) => TypedValue[];

type Step =
  | { kind: 'field'; name: string }
  | { kind: 'index'; index: number }
  | { kind: 'resolveIs'; type: string }
  | { kind: 'whereEq'; field: string; value: string }
  | { kind: 'as'; type: string };

/** Parses `part` into steps, or undefined when it uses anything beyond the supported subset. */
export function parseFastPath(part: string): { root: string; steps: Step[] } | undefined {
  let s = part.trim();
  const steps: Step[] = [];
  // `(path as T)` optionally followed by `.field...`
  const paren = /^\((.+) as ([A-Za-z]+)\)((?:\.[A-Za-z]+)*)$/.exec(s);
  let tail: Step[] = [];
  if (paren) {
    s = paren[1] as string;
    tail = [{ kind: 'as', type: paren[2] as string }];
    for (const f of (paren[3] as string).split('.').filter(Boolean)) tail.push({ kind: 'field', name: f });
  } else {
    const bareAs = /^(.+) as ([A-Za-z]+)$/.exec(s);
    if (bareAs) {
      s = bareAs[1] as string;
      tail = [{ kind: 'as', type: bareAs[2] as string }];
    }
  }
  const rootMatch = /^([A-Z][A-Za-z]*)/.exec(s);
  if (!rootMatch) return undefined;
  const root = rootMatch[1] as string;
  let i = root.length;
  const step = /^\.([a-zA-Z][A-Za-z0-9]*)(\[(\d+)\])?/;
  const where = /^\.where\((?:resolve\(\) is ([A-Z][A-Za-z]*)|([a-z][A-Za-z]*)\s*=\s*'([^'\\]*)')\)/;
  const fn = /^\.(as|ofType)\(([A-Za-z]+)\)/;
  while (i < s.length) {
    const rest = s.slice(i);
    let m = where.exec(rest);
    if (m) {
      steps.push(
        m[1]
          ? { kind: 'resolveIs', type: m[1] }
          : { kind: 'whereEq', field: m[2] as string, value: m[3] as string },
      );
      i += m[0].length;
      continue;
    }
    m = fn.exec(rest);
    if (m) {
      steps.push({ kind: 'as', type: m[2] as string });
      i += m[0].length;
      continue;
    }
    m = step.exec(rest);
    if (!m) return undefined;
    const name = m[1] as string;
    if (rest[m[0].length] === '(') return undefined; // any other function
    steps.push({ kind: 'field', name });
    if (m[3] !== undefined) steps.push({ kind: 'index', index: Number(m[3]) });
    i += m[0].length;
  }
  return { root, steps: [...steps, ...tail] };
}

/** A TypedValue that also knows the model path of its children. */
interface Node extends TypedValue {
  p: string;
}

interface Lookup {
  key: string;
  type: string;
  childPath: string;
}

function node(value: unknown, l: Lookup, holder: object, key: string | number): Node {
  const raw = typeof value === 'number' ? rawNumberText(holder, key) : undefined;
  return raw === undefined
    ? { value, type: l.type, p: l.childPath }
    : { value, type: l.type, p: l.childPath, raw };
}

function fieldOp(table: Map<string, Lookup[]>): (nodes: Node[]) => Node[] {
  return (nodes) => {
    const out: Node[] = [];
    for (const n of nodes) {
      const lookups = table.get(n.p);
      if (!lookups) continue;
      const obj = n.value as Record<string, unknown>;
      for (const l of lookups) {
        const v = obj[l.key];
        if (v === undefined || v === null) continue;
        if (Array.isArray(v)) {
          v.forEach((item: unknown, i) => {
            if (item !== null && item !== undefined) out.push(node(item, l, v, i));
          });
        } else out.push(node(v, l, obj, l.key));
      }
    }
    return out;
  };
}

/** Compiles one union part for `resourceType`; undefined when the part is outside the fast subset. */
export function compileFastPart(part: string, resourceType: string): Evaluator | undefined {
  // `Patient.deceased.exists() and Patient.deceased != false`: a boolean for every resource.
  const flag = /^([A-Za-z.]+)\.exists\(\) and \1 != false$/.exec(part.trim());
  if (flag) {
    const inner = compileFastPart(flag[1] as string, resourceType);
    if (!inner) return undefined;
    return (resource) => {
      const found = inner(resource);
      return [{ type: 'boolean', value: found.length > 0 && !found.some((f) => f.value === false) }];
    };
  }
  const parsed = parseFastPath(part);
  if (!parsed || parsed.root !== resourceType) return undefined;
  // Static typing: the model paths a node may be at after each step, with the type there.
  let paths = new Map<string, string>([[resourceType, resourceType]]);
  const ops: ((nodes: Node[]) => Node[])[] = [];
  for (const st of parsed.steps) {
    if (st.kind === 'field') {
      const table = new Map<string, Lookup[]>();
      const next = new Map<string, string>();
      for (const p of paths.keys()) {
        // Navigating into a contained resource would need its runtime type: leave that to fhirpath.
        if (p === 'Resource') return undefined;
        const info = elementInfo(p, st.name);
        if (!info) return undefined;
        const lookups = info.types.map((t) => ({
          key: info.choice ? st.name + suffixOf(t) : st.name,
          type: t,
          childPath: info.childPath(t),
        }));
        for (const l of lookups) next.set(l.childPath, l.type);
        table.set(p, lookups);
      }
      paths = next;
      ops.push(fieldOp(table));
    } else if (st.kind === 'index') {
      const idx = st.index;
      ops.push((nodes) => (idx < nodes.length ? [nodes[idx] as Node] : []));
    } else if (st.kind === 'resolveIs') {
      const type = st.type;
      ops.push((nodes) =>
        nodes.filter((n) => {
          const ref = (n.value as { reference?: unknown }).reference;
          const parts = typeof ref === 'string' ? referenceParts(ref) : undefined;
          return parts !== undefined && isTypeOf(parts.type, type);
        }),
      );
    } else if (st.kind === 'whereEq') {
      const { field, value } = st;
      ops.push((nodes) => nodes.filter((n) => (n.value as Record<string, unknown>)[field] === value));
    } else {
      const type = st.type;
      paths = new Map([...paths].filter(([, t]) => isTypeOf(t, type)));
      ops.push((nodes) => nodes.filter((n) => isTypeOf(n.type, type)));
    }
  }
  return (resource) => {
    let nodes: Node[] = [{ value: resource, type: resourceType, p: resourceType }];
    for (const op of ops) {
      nodes = op(nodes);
      if (nodes.length === 0) return nodes;
    }
    return nodes;
  };
}
