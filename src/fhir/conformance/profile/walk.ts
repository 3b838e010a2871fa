// The walk of an instance against a compiled profile (https://hl7.org/fhir/R4/validation.html#profile): cardinality
// (also per slice), types and type profiles, fixed and pattern values, slicing rules, extensions by their
// definitions, invariants; bindings are collected here and checked afterwards (bindings.ts), as they ask terminology.
import type { IssueCode, OperationOutcomeIssue } from '../../outcome.js';
import type { CompiledProfile, ElementNode } from './compile.js';
import { evaluateConstraint } from './invariants.js';
import { decidable, sliceOf, type SliceEnv } from './slicing.js';
import { containsPattern, equalJson, isObject, itemsOf, typeOfItem, type Item, type Json } from './values.js';

/** A binding to check once the walk is done. */
export interface PendingBinding {
  strength: 'required' | 'extensible';
  valueSet: string;
  type: string;
  value: unknown;
  path: string;
}

/** Work beyond this many element visits stops the walk with an issue (a hostile profile or resource). */
export const MAX_VISITS = 200_000;

export interface WalkCtx {
  root: unknown;
  /** The profile being checked, for messages. */
  profileUrl: string;
  issues: OperationOutcomeIssue[];
  bindings: PendingBinding[];
  /** A compiled profile by canonical; undefined when unknown or not loaded yet (the caller loads and walks again). */
  profile(canonical: string): CompiledProfile | undefined;
  /** Element visits so far, shared by every part of one validation. */
  work: { visits: number };
  /** Extensions already checked against their definition through a slice or a type profile. */
  checked: WeakSet<object>;
}

export class TooMuchWork extends Error {}

const BASE = 'http://hl7.org/fhir/StructureDefinition/';

function issue(
  ctx: WalkCtx,
  severity: 'error' | 'warning',
  code: IssueCode,
  text: string,
  path: string,
): void {
  ctx.issues.push({ severity, code, details: { text }, expression: [path] });
}

function sliceEnv(ctx: WalkCtx): SliceEnv {
  return { profile: (c) => ctx.profile(c), conforms: (p, item) => conforms(ctx, p, item) };
}

/** Whether an item conforms to a profile (no error issue), without reporting anything. */
function conforms(ctx: WalkCtx, p: CompiledProfile, item: Item): boolean {
  const scratch: WalkCtx = { ...ctx, issues: [], bindings: [], profileUrl: p.url, checked: new WeakSet() };
  checkItem(scratch, p.root, item);
  return !scratch.issues.some((i) => i.severity === 'error');
}

/** Checks an object (a resource, a datatype or a backbone element) against the children of `node`. */
export function checkObject(ctx: WalkCtx, node: ElementNode, obj: Json, path: string): void {
  const seen = new Set<string>();
  for (const child of node.children.values()) {
    const items = itemsOf(obj, child.name, path);
    for (const it of items) seen.add(it.key);
    const at = `${path}.${child.name.replace('[x]', '')}`;
    if (items.length < child.min)
      issue(
        ctx,
        'error',
        'required',
        `${at}: at least ${child.min} required by ${ctx.profileUrl}, found ${items.length}`,
        at,
      );
    if (items.length > child.max)
      issue(
        ctx,
        'error',
        'structure',
        `${at}: at most ${child.max} allowed by ${ctx.profileUrl}, found ${items.length}`,
        at,
      );
    if (child.slicing && child.slices.length > 0) checkSliced(ctx, child, items, at);
    else for (const item of items) checkItem(ctx, child, item);
  }
  for (const key of Object.keys(obj)) {
    const name = key.startsWith('_') ? key.slice(1) : key;
    if (seen.has(name) || key === 'resourceType') continue;
    if (name === 'extension' || name === 'modifierExtension')
      extensionsByUrl(ctx, obj[key], `${path}.${name}`);
    else scanExtensions(ctx, obj[key], `${path}.${name}`);
  }
}

/** Parts of an instance the profile says nothing about: their extensions are still checked by their definitions. */
function scanExtensions(ctx: WalkCtx, value: unknown, path: string): void {
  if (Array.isArray(value)) {
    value.forEach((v, i) => scanExtensions(ctx, v, `${path}[${i}]`));
    return;
  }
  if (!isObject(value)) return;
  if (++ctx.work.visits > MAX_VISITS) throw new TooMuchWork();
  if (typeof value.resourceType === 'string') return; // a contained or nested resource: its own profiles
  for (const key of Object.keys(value)) {
    const name = key.startsWith('_') ? key.slice(1) : key;
    if (name === 'extension' || name === 'modifierExtension')
      extensionsByUrl(ctx, value[key], `${path}.${name}`);
    else scanExtensions(ctx, value[key], `${path}.${name}`);
  }
}

/** Assigns items to slices, checks the slicing rules and each slice's cardinality, then each item. */
function checkSliced(ctx: WalkCtx, node: ElementNode, items: Item[], at: string): void {
  if (!decidable(node)) {
    // E.g. `resolve()` discriminators: the slices cannot be told apart here; say so rather than guess.
    const paths = (node.slicing?.discriminators ?? []).map((d) => d.path).join(', ') || 'none';
    const text = `${at}: slicing not checked (discriminator ${paths}) (${ctx.profileUrl})`;
    if (items.length > 0) issue(ctx, 'warning', 'not-supported', text, at);
    for (const item of items) checkItem(ctx, node, item);
    return;
  }
  const env = sliceEnv(ctx);
  const assigned = items.map((item) => sliceOf(env, node, item));
  checkSlicingRules(ctx, node, items, assigned, at);
  node.slices.forEach((s, k) => {
    const n = assigned.filter((x) => x === k).length;
    const name = `${at}: slice '${s.sliceName}'`;
    if (n < s.min)
      issue(
        ctx,
        'error',
        'required',
        `${name} requires at least ${s.min}, found ${n} (${ctx.profileUrl})`,
        at,
      );
    if (n > s.max)
      issue(ctx, 'error', 'structure', `${name} allows at most ${s.max}, found ${n} (${ctx.profileUrl})`, at);
  });
  items.forEach((item, i) => checkItem(ctx, assigned[i]! >= 0 ? node.slices[assigned[i]!]! : node, item));
}

/** Closed (every item in a slice), openAtEnd (items of no slice last) and ordered (slices in their order). */
function checkSlicingRules(
  ctx: WalkCtx,
  node: ElementNode,
  items: Item[],
  assigned: number[],
  at: string,
): void {
  const slicing = node.slicing!;
  const refuse = (item: Item, why: string): void =>
    issue(ctx, 'error', 'structure', `${item.path}: ${why} (${ctx.profileUrl})`, item.path);
  let last = -1;
  let unmatchedSeen = false;
  assigned.forEach((k, i) => {
    const item = items[i]!;
    if (k < 0 && slicing.rules === 'closed')
      refuse(item, `matches no slice of ${at} and the slicing is closed`);
    if (k >= 0 && slicing.rules === 'openAtEnd' && unmatchedSeen)
      refuse(item, `items of no slice must come last in ${at}`);
    if (k >= 0 && slicing.ordered && k < last)
      refuse(item, `the slices of ${at} are ordered; ${node.slices[k]!.sliceName} comes too late`);
    if (k < 0) unmatchedSeen = true;
    else last = k;
  });
}

/** Checks one value against an element definition. */
export function checkItem(ctx: WalkCtx, node: ElementNode, item: Item): void {
  if (++ctx.work.visits > MAX_VISITS) throw new TooMuchWork();
  const type = typeOfItem(item, node.types);
  if (item.type && node.types.length > 0 && !node.types.some((t) => t.code === item.type))
    issue(
      ctx,
      'error',
      'structure',
      `${item.path}: type ${item.type} is not allowed here; expected ${node.types.map((t) => t.code).join(' | ')} (${ctx.profileUrl})`,
      item.path,
    );
  if (node.fixed !== undefined && !equalJson(item.value, node.fixed))
    issue(
      ctx,
      'error',
      'value',
      `${item.path}: must be exactly ${JSON.stringify(node.fixed).slice(0, 300)} (${ctx.profileUrl})`,
      item.path,
    );
  if (node.pattern !== undefined && !containsPattern(item.value, node.pattern))
    issue(
      ctx,
      'error',
      'value',
      `${item.path}: must contain ${JSON.stringify(node.pattern).slice(0, 300)} (${ctx.profileUrl})`,
      item.path,
    );
  const b = node.binding;
  if (b && (b.strength === 'required' || b.strength === 'extensible') && type && item.value !== undefined)
    ctx.bindings.push({
      strength: b.strength,
      valueSet: b.valueSet,
      type,
      value: item.value,
      path: item.path,
    });
  checkConstraints(ctx, node, item);
  if (isObject(item.value)) {
    checkObject(ctx, node, item.value, item.path);
    checkTypeProfiles(ctx, node, item, type);
    if (type === 'Reference') checkTarget(ctx, node, item);
    if (type === 'Extension') extensionsByUrl(ctx, [item.value], item.path, true);
  }
  if (item.extra) extensionsByUrl(ctx, item.extra.extension, `${item.path}.extension`);
}

function checkConstraints(ctx: WalkCtx, node: ElementNode, item: Item): void {
  for (const c of node.constraints) {
    const r = evaluateConstraint(c, node.path, item.value, item.extra, ctx.root);
    if ('error' in r)
      issue(
        ctx,
        'warning',
        'processing',
        `${item.path}: invariant ${c.key} could not be evaluated: ${r.error.slice(0, 300)}`,
        item.path,
      );
    else if (!r.ok)
      issue(
        ctx,
        c.severity,
        'invariant',
        `${item.path}: ${c.key}: ${c.human || c.expression} (${ctx.profileUrl})`,
        item.path,
      );
  }
}

/** Type profiles (an extension's definition, a datatype profile): the value must conform to one of them. */
function checkTypeProfiles(ctx: WalkCtx, node: ElementNode, item: Item, type: string | undefined): void {
  const t = node.types.find((x) => x.code === type) ?? (node.types.length === 1 ? node.types[0] : undefined);
  const canonicals = (t?.profiles ?? []).filter((p) => p !== `${BASE}${t?.code}`);
  if (canonicals.length === 0) return;
  const known = canonicals.map((c) => ctx.profile(c)).filter((p): p is CompiledProfile => p !== undefined);
  if (known.length === 0) return;
  if (isObject(item.value) && t?.code === 'Extension') ctx.checked.add(item.value);
  if (known.length > 1 && known.some((p) => conforms(ctx, p, item))) return;
  const p = known[0]!;
  checkItem({ ...ctx, profileUrl: p.url }, p.root, item);
}

/** `Type/id` at the end of a literal reference (relative or absolute, with or without `_history`). */
const LITERAL = /(?:^|\/)([A-Z][A-Za-z]+)\/[A-Za-z0-9\-.]{1,64}(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/;

/** A literal reference's type must be one its targetProfiles allow (when the server knows them all). */
function checkTarget(ctx: WalkCtx, node: ElementNode, item: Item): void {
  const targets = node.types.find((t) => t.code === 'Reference')?.targets ?? [];
  const ref = isObject(item.value) ? item.value.reference : undefined;
  if (targets.length === 0 || typeof ref !== 'string') return;
  const type = LITERAL.exec(ref)?.[1];
  if (!type) return; // contained (#id), urn:uuid, or not a FHIR REST URL
  const allowed: string[] = [];
  for (const t of targets) {
    // A base definition's tail is its type (…/Patient); other profiles (…/vitalsigns, US Core) say theirs.
    const tail = t.startsWith(BASE) ? t.slice(BASE.length).split('|')[0] : undefined;
    const base = tail && /^[A-Z][A-Za-z]+$/.test(tail) ? tail : ctx.profile(t)?.type;
    if (!base || base === 'Resource') return;
    allowed.push(base);
  }
  if (!allowed.includes(type))
    issue(
      ctx,
      'error',
      'structure',
      `${item.path}.reference: a reference to ${type} is not allowed here; expected ${[...new Set(allowed)].join(' | ')} (${ctx.profileUrl})`,
      `${item.path}.reference`,
    );
}

/** Extensions not checked through a slice: each against its definition, found by url, when the server knows it. */
function extensionsByUrl(ctx: WalkCtx, list: unknown, at: string, single = false): void {
  if (!Array.isArray(list)) return;
  list.forEach((ext: unknown, i) => {
    if (!isObject(ext) || ctx.checked.has(ext) || typeof ext.url !== 'string') return;
    const p = ctx.profile(ext.url);
    if (!p) return;
    ctx.checked.add(ext);
    checkItem({ ...ctx, profileUrl: p.url }, p.root, {
      value: ext,
      key: 'extension',
      path: single ? at : `${at}[${i}]`,
    });
  });
}
