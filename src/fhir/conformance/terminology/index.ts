// Terminology over stored and shared code systems and value sets (API.md §9, https://hl7.org/fhir/R4/terminology-
// service.html): expansion, membership, and the hierarchy of a code system, as profile validation, search (`:in`,
// `:below`, `:above`) and the terminology operations ask. Resolution is the caller's project first, then the shared
// set (resolver.ts); compiled code systems and expansions are cached (cache.ts).
import { FhirError } from '../../outcome.js';
import type { Resource } from '../../types.js';
import type {
  At,
  Coding,
  ConformanceResolver,
  ExpandOptions,
  Expansion,
  Terminology,
  ValidateCodeResult,
} from '../model.js';
import { stampOf } from '../resolver.js';
import { contentStamp, createTerminologyCache, type CachedExpansion, type Dependency } from './cache.js';
import type { CodeSystemIndex } from './code-system-index.js';
import { codeKey, expandCompose, type Code } from './expand.js';

export { UNKNOWN_SYSTEM } from './expand.js';
export type { CodeSystemIndex } from './code-system-index.js';

/** Codes one expansion may have (the limit of API.md §9's `too-costly`). */
export const MAX_EXPANSION = 100_000;
/** Value sets importing value sets, nested at most this deep. */
export const MAX_IMPORT_DEPTH = 32;

export interface TerminologyLimits {
  maxCodes: number;
  maxImportDepth: number;
}

/** Terminology with what the operations need besides (CodeSystem $lookup, $subsumes, $validate-code). */
export interface TerminologyService extends Terminology {
  /** A code system compiled (by canonical, and version when given); undefined when unknown. */
  codeSystem(at: At, system: string, version?: string): Promise<CodeSystemIndex | undefined>;
  /** A stored (or shared) CodeSystem compiled, cached by its identity (stampOf): the target of an instance call. */
  compileStored(resource: Resource): CodeSystemIndex;
  /** Every code of a value set, or undefined when it is unknown; throws (4xx) when it cannot be expanded. */
  codes(at: At, valueSet: string | Resource): Promise<readonly Code[] | undefined>;
}

/** The services of `t` when it is Cinder's own terminology (operations need more than the Terminology interface). */
export function asService(t: Terminology): TerminologyService {
  if ('codeSystem' in t && 'codes' in t) return t as TerminologyService;
  throw new FhirError('not-supported', 'No terminology service is configured', 'terminology.none');
}

const cycle = (canonical: string): FhirError =>
  new FhirError(
    'processing',
    `The value set ${canonical.slice(0, 200)} imports itself (a cycle)`,
    'terminology.cycle',
    {
      status: 422,
    },
  );
const tooDeep = (max: number): FhirError =>
  new FhirError(
    'too-costly',
    `Value sets import value sets more than ${max} levels deep`,
    'terminology.too-deep',
  );
const missingImport = (canonical: string): FhirError =>
  new FhirError(
    'not-found',
    `The imported value set ${canonical.slice(0, 200)} is not known to this server`,
    'terminology.import-not-found',
    { status: 422 },
  );

/** A value set to expand: its cache key in `at`'s project, and its content (read only on a cache miss). */
interface Target {
  key: string;
  label: string;
  load(): Promise<Resource | undefined>;
}

export function createTerminology(deps: {
  resolver: ConformanceResolver;
  limits?: Partial<TerminologyLimits>;
}): TerminologyService {
  const limits: TerminologyLimits = {
    maxCodes: MAX_EXPANSION,
    maxImportDepth: MAX_IMPORT_DEPTH,
    ...deps.limits,
  };
  const cache = createTerminologyCache(deps.resolver);
  const project = (at: At): string => at.projectId ?? '-';

  async function codeSystem(at: At, system: string, version?: string, seen?: Dependency[]) {
    const canonical = version ? `${system}|${version}` : system;
    const now = await cache.current(at, 'CodeSystem', canonical);
    seen?.push({ type: 'CodeSystem', canonical, stamp: now.stamp });
    const compiled = cache.compiled(now.stamp);
    if (compiled !== undefined) return compiled ?? undefined;
    const r = now.resource ?? (await deps.resolver.resolve(at, 'CodeSystem', canonical));
    return cache.index(now.stamp, r) ?? undefined;
  }

  function byCanonical(at: At, canonical: string): Promise<{ target: Target; dep: Dependency }> {
    return cache.current(at, 'ValueSet', canonical).then((now) => ({
      dep: { type: 'ValueSet', canonical, stamp: now.stamp },
      target: {
        key: `${project(at)}|${now.stamp}`,
        label: canonical,
        load: async () => now.resource ?? (await deps.resolver.resolve(at, 'ValueSet', canonical)),
      },
    }));
  }

  async function expansion(
    at: At,
    target: Target,
    chain: readonly string[],
  ): Promise<CachedExpansion | undefined> {
    if (chain.includes(target.key)) throw cycle(target.label);
    if (chain.length >= limits.maxImportDepth) throw tooDeep(limits.maxImportDepth);
    const hit = await cache.expansion(at, target.key);
    if (hit) return hit;
    const vs = await target.load();
    if (!vs) return undefined;
    const seen: Dependency[] = [];
    const codes = await expandCompose(vs, {
      maxCodes: limits.maxCodes,
      codeSystem: (system, version) => codeSystem(at, system, version, seen),
      valueSet: async (canonical) => {
        const { target: inner, dep } = await byCanonical(at, canonical);
        seen.push(dep);
        const sub = await expansion(at, inner, [...chain, target.key]);
        if (!sub) throw missingImport(canonical);
        seen.push(...sub.deps);
        return sub.codes;
      },
    });
    const unique = [...new Map(seen.map((d) => [`${d.type} ${d.canonical}`, d])).values()];
    const e: CachedExpansion = { codes, list: [...codes.values()], deps: unique };
    cache.remember(target.key, e);
    return e;
  }

  async function expanded(at: At, valueSet: string | Resource): Promise<CachedExpansion | undefined> {
    if (typeof valueSet !== 'string') {
      const key = `${project(at)}|${contentStamp(valueSet)}`;
      return expansion(at, { key, label: String(valueSet.url ?? 'inline'), load: async () => valueSet }, []);
    }
    return expansion(at, (await byCanonical(at, valueSet)).target, []);
  }

  async function expand(
    at: At,
    valueSet: string | Resource,
    options: ExpandOptions = {},
  ): Promise<Expansion | undefined> {
    const e = await expanded(at, valueSet);
    if (!e) return undefined;
    const text = options.filter?.toLowerCase();
    const active = options.activeOnly === true;
    const matching =
      text || active
        ? e.list.filter(
            (c) =>
              (!active || !c.inactive) &&
              (!text || c.code.toLowerCase().includes(text) || !!c.display?.toLowerCase().includes(text)),
          )
        : e.list;
    const offset = options.offset ?? 0;
    const end = options.count === undefined ? undefined : offset + options.count;
    return { total: matching.length, contains: matching.slice(offset, end) };
  }

  async function validateCode(
    at: At,
    valueSet: string | Resource,
    coding: Coding,
  ): Promise<ValidateCodeResult | undefined> {
    let e: CachedExpansion | undefined;
    try {
      e = await expanded(at, valueSet);
    } catch (err) {
      // A value set that cannot be expanded (unknown code system, too large, a cycle): nobody can tell.
      if (err instanceof FhirError && err.status === 422) return undefined;
      throw err;
    }
    if (!e) return undefined;
    return membership(e, coding, typeof valueSet === 'string' ? valueSet : String(valueSet.url ?? 'inline'));
  }

  async function hierarchy(at: At, system: string, code: string, up: boolean) {
    const cs = await codeSystem(at, system);
    const i = cs?.find(code);
    if (!cs || i === undefined) return undefined;
    return [i, ...(up ? cs.ancestors(i) : cs.descendants(i))].map((k) => cs.concepts[k]?.code as string);
  }

  return {
    expand,
    validateCode,
    below: (at, system, code) => hierarchy(at, system, code, false),
    above: (at, system, code) => hierarchy(at, system, code, true),
    codeSystem: (at, system, version) => codeSystem(at, system, version),
    compileStored: (r) => cache.index(stampOf('CodeSystem', r), r) as CodeSystemIndex,
    codes: async (at, valueSet) => (await expanded(at, valueSet))?.list,
  };
}

/** Whether `coding` is in the expansion, its display checked when given. */
function membership(e: CachedExpansion, coding: Coding, label: string): ValidateCodeResult {
  const code = coding.code ?? '';
  const found =
    coding.system !== undefined
      ? e.codes.get(codeKey(coding.system, code))
      : e.list.find((c) => c.code === code);
  const what = `${coding.system ?? ''}#${code}`.slice(0, 300);
  if (!found)
    return { result: false, message: `The code ${what} is not in the value set ${label.slice(0, 200)}` };
  const display = found.display;
  if (coding.display !== undefined && display !== undefined && coding.display !== display)
    return {
      result: false,
      message: `The display "${coding.display.slice(0, 200)}" is not the display of ${what} ("${display}")`,
      display,
    };
  return { result: true, ...(display !== undefined ? { display } : {}) };
}
