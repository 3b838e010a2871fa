// Reads the shared conformance resources (API.md §9) from their sources, keeping of each only where its text lies and
// a small stub for searches: the base bundles are scanned a chunk at a time (bundle-scan.ts) and each entry read
// again by byte range when needed; a package folder's files are read again from disk; a `.tgz`'s files are kept deflated in memory.
// https://hl7.org/fhir/R4/conformance-module.html
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import type { Resource } from '../types.js';
import { bundleFileEntries } from './bundle-scan.js';
import { isConformanceType, type ConformanceType } from './model.js';
import { BASE_FILES, baseDefinitionsDir, packageFiles, type PackageSource } from './package-sources.js';

export interface LoadedResource {
  type: ConformanceType;
  id: string;
  url?: string;
  version?: string;
  stub: string;
  size: number;
  read: () => Resource;
}

/**
 * Elements left out of a stub: the large ones (narrative, element lists, concepts, compose and expansion, map groups,
 * contained resources). A search parameter whose expression reaches one of them is matched on full resources.
 */
export const STUB_OMITTED: ReadonlySet<string> = new Set([
  'text',
  'snapshot',
  'differential',
  'concept',
  'compose',
  'expansion',
  'group',
  'contained',
]);

function stubOf(r: Resource): string {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(r)) if (!STUB_OMITTED.has(k)) out[k] = v;
  return JSON.stringify(out);
}

/** A conformance resource with an id, or undefined for anything else. */
function accepted(value: unknown): Resource | undefined {
  const r = value as Resource | null;
  if (r === null || typeof r !== 'object' || typeof r.resourceType !== 'string') return undefined;
  if (!isConformanceType(r.resourceType) || typeof r.id !== 'string' || r.id === '') return undefined;
  return r;
}

function describe(r: Resource, size: number, read: () => Resource): LoadedResource {
  const url = typeof r.url === 'string' ? r.url : undefined;
  const version = typeof r.version === 'string' ? r.version : undefined;
  return {
    type: r.resourceType as ConformanceType,
    id: r.id as string,
    ...(url !== undefined ? { url } : {}),
    ...(version !== undefined ? { version } : {}),
    stub: stubOf(r),
    size,
    read,
  };
}

/** Reads bytes [start, end) of a file (the file stays on disk; node_modules does not change under a running server). */
function readRange(file: string, start: number, end: number): Buffer {
  const buf = Buffer.alloc(end - start);
  const fd = fs.openSync(file, 'r');
  try {
    fs.readSync(fd, buf, 0, buf.length, start);
  } finally {
    fs.closeSync(fd);
  }
  return buf;
}

/** Entries, and bytes of them, read between two pauses of a load that gives way to other work (loadSourcesAsync). */
const STEP = 250;
const STEP_BYTES = 1 << 20;

function* loadBundleFile(file: string, out: LoadedResource[]): Generator<void> {
  let n = 0;
  let bytesRead = 0;
  for (const [start, end, bytes] of bundleFileEntries(file)) {
    bytesRead += bytes.length;
    if (++n % STEP === 0 || bytesRead > STEP_BYTES) {
      bytesRead = 0;
      yield;
    }
    const entry = JSON.parse(bytes.toString('utf8')) as { resource?: unknown };
    const r = accepted(entry.resource);
    if (!r) continue;
    const read = (): Resource =>
      (JSON.parse(readRange(file, start, end).toString('utf8')) as { resource: Resource }).resource;
    out.push(describe(r, end - start, read));
  }
}

function* loadPackage(source: PackageSource, out: LoadedResource[]): Generator<void> {
  let n = 0;
  let bytesRead = 0;
  for (const file of packageFiles(source)) {
    const bytes = file.read();
    bytesRead += bytes.length;
    if (++n % STEP === 0 || bytesRead > STEP_BYTES) {
      bytesRead = 0;
      yield;
    }
    let r: Resource | undefined;
    try {
      r = accepted(JSON.parse(bytes.toString('utf8')));
    } catch {
      continue; // not JSON: not a resource of the package
    }
    if (!r) continue;
    const diskPath = file.diskPath;
    const deflated = diskPath === undefined ? zlib.deflateRawSync(bytes) : undefined;
    const read = (): Resource =>
      JSON.parse(
        (diskPath !== undefined
          ? fs.readFileSync(diskPath)
          : zlib.inflateRawSync(deflated as Buffer)
        ).toString('utf8'),
      ) as Resource;
    out.push(describe(r, bytes.length, read));
  }
}

/** The load in steps (it pauses now and then), returning every shared resource: the R4 base, then each package. */
function* loadSteps(sources: readonly PackageSource[], withBase: boolean): Generator<void, LoadedResource[]> {
  const out: LoadedResource[] = [];
  if (withBase) {
    const dir = baseDefinitionsDir();
    for (const f of BASE_FILES) yield* loadBundleFile(path.join(dir, f), out);
  }
  for (const s of sources) {
    try {
      yield* loadPackage(s, out);
    } catch (err) {
      throw new Error(`Config packages: '${s.spec}' cannot be read: ${(err as Error).message}`);
    }
  }
  return out;
}

/** Every shared resource, at once (a caller that needs an answer now). */
export function loadSources(sources: readonly PackageSource[], withBase: boolean): LoadedResource[] {
  const steps = loadSteps(sources, withBase);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/** Every shared resource, giving way to other work between steps (a search's first use does not hold the others). */
export async function loadSourcesAsync(
  sources: readonly PackageSource[],
  withBase: boolean,
): Promise<LoadedResource[]> {
  const steps = loadSteps(sources, withBase);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}
