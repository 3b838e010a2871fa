// Validation against profiles (API.md §9, https://hl7.org/fhir/R4/validation.html#profile): each profile is resolved
// in the caller's project then the shared set, compiled once (cached by project, canonical and the stored version, so
// an updated profile is seen at once and one project's profile never serves another) and walked synchronously;
// the profiles it refers to (extensions, type profiles) are resolved between walks, then bindings are checked.
import type { OperationOutcomeIssue } from '../../outcome.js';
import type { Resource } from '../../types.js';
import type { At, ConformanceResolver, ProfileValidator, Terminology } from '../model.js';
import { checkBindings } from './bindings.js';
import { compileProfile, ProfileCompileError, type CompiledProfile } from './compile.js';
import { checkItem, TooMuchWork, type WalkCtx } from './walk.js';

const BASE = 'http://hl7.org/fhir/StructureDefinition/';
/** Walks of one resource against one profile while the profiles it refers to are being found. */
const MAX_ROUNDS = 6;
const MAX_CACHED = 500;
/** Profiles (extensions, type and target profiles) resolved at most for one resource against one profile. */
const MAX_CANONICALS = 64;

type Compiled = CompiledProfile | ProfileCompileError;

/** A bounded map that forgets its oldest entries. */
class Lru<V> {
  private readonly map = new Map<string, V>();
  constructor(private readonly max: number) {}
  get(key: string): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }
  set(key: string, v: V): void {
    this.map.delete(key);
    this.map.set(key, v);
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value as string);
  }
}

function compileSafely(sd: Resource): Compiled {
  try {
    return compileProfile(sd);
  } catch (err) {
    return err instanceof ProfileCompileError ? err : new ProfileCompileError(String(err));
  }
}

const issue = (
  severity: OperationOutcomeIssue['severity'],
  code: OperationOutcomeIssue['code'],
  text: string,
  expression: string,
): OperationOutcomeIssue => ({ severity, code, details: { text }, expression: [expression] });

export function createProfileValidator(deps: {
  resolver: ConformanceResolver;
  terminology: Terminology;
}): ProfileValidator {
  const compiled = new Lru<Compiled>(MAX_CACHED);
  const shared = new WeakMap<object, Compiled>();
  // The canonicals a profile needed last time (per project), resolved before the first walk so one walk usually does.
  const needs = new Lru<string[]>(MAX_CACHED);
  const resolved = new WeakMap<At, Map<string, Promise<Resource | undefined>>>();

  /** Resolves and compiles a profile; undefined when the server does not know it. */
  async function load(at: At, canonical: string): Promise<Compiled | undefined> {
    // One `At` is one call (a write passes the same one for every version it stores): canonicals resolve once in it.
    let memo = resolved.get(at);
    if (!memo) resolved.set(at, (memo = new Map()));
    let pending = memo.get(canonical);
    if (!pending)
      memo.set(canonical, (pending = deps.resolver.resolve(at, 'StructureDefinition', canonical)));
    const sd = await pending;
    if (!sd) return undefined;
    const meta = sd.meta as { versionId?: unknown; lastUpdated?: unknown } | undefined;
    if (typeof meta?.versionId !== 'string') {
      // The shared set's resources never change: the object itself is the key.
      let c = shared.get(sd);
      if (!c) shared.set(sd, (c = compileSafely(sd)));
      return c;
    }
    const key = [at.projectId, canonical, sd.id, meta.versionId, String(meta.lastUpdated)].join('\n');
    let c = compiled.get(key);
    if (!c) compiled.set(key, (c = compileSafely(sd)));
    return c;
  }

  async function walk(at: At, resource: Resource, main: CompiledProfile, canonical: string) {
    const loaded = new Map<string, CompiledProfile | null>([[canonical, main]]);
    const loadAll = async (list: Iterable<string>): Promise<void> => {
      let todo = [...new Set(list)].filter((c) => !loaded.has(c));
      // Beyond a bound, what a resource names (e.g. thousands of distinct extension urls) is not looked up.
      const room = Math.max(0, MAX_CANONICALS - loaded.size);
      for (const c of todo.slice(room)) loaded.set(c, null);
      todo = todo.slice(0, room);
      const found = await Promise.all(todo.map((c) => load(at, c)));
      todo.forEach((c, i) => {
        const p = found[i];
        loaded.set(c, p && !(p instanceof ProfileCompileError) ? p : null);
      });
    };
    const needKey = `${at.projectId}\n${canonical}`;
    await loadAll(needs.get(needKey) ?? []);
    const work = { visits: 0 };
    let ctx: WalkCtx | undefined;
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const missing = new Set<string>();
      ctx = {
        root: resource,
        profileUrl: main.url,
        issues: [],
        bindings: [],
        work,
        checked: new WeakSet(),
        profile(c) {
          const p = loaded.get(c);
          if (p === undefined) missing.add(c);
          return p ?? undefined;
        },
      };
      checkItem(ctx, main.root, { value: resource, key: '', path: resource.resourceType });
      if (missing.size === 0) break;
      await loadAll(missing);
    }
    needs.set(needKey, [...loaded.keys()]);
    return ctx!;
  }

  async function validateOne(
    at: At,
    resource: Resource,
    p: { canonical: string; explicit: boolean },
  ): Promise<OperationOutcomeIssue[]> {
    const type = resource.resourceType;
    const where = p.explicit ? 'profile' : `${type}.meta.profile`;
    const name = p.canonical.slice(0, 200);
    const main = await load(at, p.canonical);
    if (!main) {
      if (p.canonical === `${BASE}${type}`) return []; // the base validator's (the first pass)
      return [issue(p.explicit ? 'error' : 'warning', 'not-found', `Unknown profile ${name}`, where)];
    }
    if (main instanceof ProfileCompileError)
      return [issue('warning', 'not-supported', `Profile ${name} cannot be used: ${main.message}`, where)];
    if (main.type !== type)
      return [
        issue('error', 'invalid', `Profile ${name} is for ${main.type.slice(0, 64)}, not ${type}`, where),
      ];
    try {
      const ctx = await walk(at, resource, main, p.canonical);
      const issues = ctx.issues;
      await checkBindings(deps.terminology, at, ctx.bindings, issues);
      return issues;
    } catch (err) {
      if (err instanceof TooMuchWork)
        return [issue('error', 'too-costly', `Validation against ${name} needs too much work`, type)];
      const why = (err instanceof Error ? err.message : String(err)).split('\n')[0]?.slice(0, 300);
      return [issue('error', 'processing', `Validation against ${name} failed: ${why}`, type)];
    }
  }

  return {
    async validate(at, resource, profiles) {
      const out: OperationOutcomeIssue[] = [];
      const seen = new Set<string>();
      for (const p of profiles) {
        if (seen.has(p.canonical)) continue;
        seen.add(p.canonical);
        out.push(...(await validateOne(at, resource, p)));
      }
      return out;
    },
  };
}
