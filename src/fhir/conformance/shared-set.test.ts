// The shared conformance set (API.md §9): package sources (folder, unpacked `package/`, `.tgz`, npm name), what a
// package contributes, canonical versions, the R4 base loaded on first use only, and the byte scanner and tar reader
// it is read with.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  US_CORE_VERSION,
  usCoreDefinitions,
  writePackageFolder,
  writePackageTgz,
} from '../../../test/support/fhir-package.js';
import { BundleEntryScanner, bundleEntryRanges, bundleFileEntries } from './bundle-scan.js';
import { candidateFile, resolvePackageSources } from './package-sources.js';
import { compareVersions, createSharedSet } from './shared-set.js';
import { readTarGz } from './tar-gz.js';

const US_CORE_PATIENT = 'http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient';

/** A package folder holding the given resources (one file each). */
function folderWith(resources: Record<string, unknown>[], name = 'example.pkg'): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-pkg-'));
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0' }));
  resources.forEach((r, i) => fs.writeFileSync(path.join(dir, `r${i}.json`), JSON.stringify(r)));
  return dir;
}

describe('package sources', () => {
  it('accepts a package folder, its parent holding package/, a .tgz and an npm name under cwd', () => {
    const parent = writePackageFolder();
    const tgz = writePackageTgz();
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-cwd-'));
    fs.mkdirSync(path.join(cwd, 'node_modules', '@acme'), { recursive: true });
    fs.cpSync(path.join(parent, 'package'), path.join(cwd, 'node_modules', '@acme', 'us-core'), {
      recursive: true,
    });
    const sources = resolvePackageSources([parent, path.join(parent, 'package'), tgz, '@acme/us-core'], cwd);
    expect(sources.map((s) => s.kind)).toEqual(['folder', 'folder', 'tgz', 'folder']);
    expect(sources[0]).toMatchObject({ dir: path.join(parent, 'package') });
    expect(sources[3]).toMatchObject({ dir: path.join(cwd, 'node_modules', '@acme', 'us-core') });
  });

  it('refuses, naming it, a missing path, a folder without package.json, a file that is no gzip, an unknown name', () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-empty-'));
    const text = path.join(empty, 'not-a.tgz');
    fs.writeFileSync(text, 'hello');
    expect(() => resolvePackageSources(['./no/such/dir'], empty)).toThrow(/'\.\/no\/such\/dir'/);
    expect(() => resolvePackageSources([empty])).toThrow(/holds no package\.json/);
    expect(() => resolvePackageSources([text])).toThrow(/not a package \.tgz/);
    expect(() => resolvePackageSources(['hl7.fhir.no.such'], empty)).toThrow(
      /'hl7\.fhir\.no\.such'.*npm package/,
    );
    expect(() => createSharedSet({ packages: ['../../etc/passwd-nothing'] })).toThrow(/Config packages/);
  });

  it('reads *.json files, not indexes, examples or package.json', () => {
    expect(candidateFile('StructureDefinition-x.json')).toBe(true);
    expect(candidateFile('other/ValueSet-y.json')).toBe(true);
    expect(candidateFile('.index.json')).toBe(false);
    expect(candidateFile('package.json')).toBe(false);
    expect(candidateFile('example/Patient-1.json')).toBe(false);
    expect(candidateFile('openapi/x.yaml')).toBe(false);
  });
});

describe('shared set', () => {
  it.each([
    ['folder', writePackageFolder],
    ['tgz', writePackageTgz],
  ])('holds the conformance resources of a package (%s), and nothing else', (_kind, write) => {
    const set = createSharedSet({ packages: [write()], withoutBase: true });
    const ids = [...set.all('StructureDefinition')].map((r) => r.id).sort();
    expect(ids).toEqual(
      usCoreDefinitions()
        .map((r) => r.id)
        .sort(),
    );
    expect(set.byUrl('StructureDefinition', US_CORE_PATIENT)?.version).toBe(US_CORE_VERSION);
    expect(set.byUrl('StructureDefinition', US_CORE_PATIENT, US_CORE_VERSION)?.id).toBe('us-core-patient');
    expect(set.byUrl('StructureDefinition', US_CORE_PATIENT, '1.0.0')).toBeUndefined();
    expect(set.byUrl('StructureDefinition', 'http://example.org/x')).toBeUndefined();
    expect(set.byId('StructureDefinition', 'us-core-race')?.url).toContain('us-core-race');
    expect(set.byUrl('ValueSet', US_CORE_PATIENT)).toBeUndefined();
  });

  it('resolves a canonical without version to the latest, and each version when asked', () => {
    const vs = (id: string, version?: string) => ({
      resourceType: 'ValueSet',
      id,
      url: 'http://example.org/vs',
      ...(version ? { version } : {}),
      status: 'active',
    });
    const set = createSharedSet({
      packages: [folderWith([vs('a', '1.9.0'), vs('b', '1.10.0'), vs('c')]), folderWith([vs('d', '1.2.0')])],
      withoutBase: true,
    });
    expect(set.byUrl('ValueSet', 'http://example.org/vs')?.id).toBe('b');
    expect(set.byUrl('ValueSet', 'http://example.org/vs', '1.9.0')?.id).toBe('a');
    expect(set.byUrl('ValueSet', 'http://example.org/vs', '1.2.0')?.id).toBe('d');
    expect(set.entriesByUrl('ValueSet', 'http://example.org/vs').map((e) => e.id)).toEqual([
      'a',
      'b',
      'c',
      'd',
    ]);
    expect(compareVersions('5.0.10', '5.0.9')).toBeGreaterThan(0);
    expect(compareVersions(undefined, '0')).toBeLessThan(0);
  });

  it('keeps one resource per id: the latest version, else the later loaded', () => {
    const cs = (version: string, title: string) => ({
      resourceType: 'CodeSystem',
      id: 'same',
      url: 'http://example.org/cs',
      version,
      title,
      status: 'active',
      content: 'complete',
    });
    const set = createSharedSet({
      packages: [folderWith([cs('2.0.0', 'new')]), folderWith([cs('1.0.0', 'old')])],
      withoutBase: true,
    });
    expect(set.byId('CodeSystem', 'same')?.title).toBe('new');
    expect([...set.all('CodeSystem')].length).toBe(1);
    // Both versions stay resolvable by canonical.
    expect(set.byUrl('CodeSystem', 'http://example.org/cs', '1.0.0')?.title).toBe('old');
  });

  it('reads nothing until first used, then the R4 base', () => {
    const set = createSharedSet({ packages: [] });
    const vs = set.byUrl('ValueSet', 'http://hl7.org/fhir/ValueSet/administrative-gender');
    expect(vs).toMatchObject({
      id: 'administrative-gender',
      compose: { include: [{ system: 'http://hl7.org/fhir/administrative-gender' }] },
    });
    expect(set.byId('StructureDefinition', 'Patient')?.snapshot).toBeDefined();
    expect(
      set.byUrl('StructureDefinition', 'http://hl7.org/fhir/StructureDefinition/patient-birthPlace'),
    ).toBeDefined();
    expect(
      set.byUrl('SearchParameter', 'http://hl7.org/fhir/SearchParameter/individual-gender'),
    ).toBeDefined();
    expect(
      set.byUrl('ConceptMap', 'http://hl7.org/fhir/ConceptMap/cm-administrative-gender-v2'),
    ).toBeDefined();
    expect(set.byUrl('CodeSystem', 'http://terminology.hl7.org/CodeSystem/v2-0001')).toBeDefined();
    expect(set.byUrl('CodeSystem', 'http://terminology.hl7.org/CodeSystem/v3-ActCode')).toBeDefined();
    expect(set.entries('ValueSet').length).toBeGreaterThan(1300);
  });
});

describe('bundle scan', () => {
  it("finds each entry's bytes, whatever strings, escapes and multi-byte characters hold", () => {
    const bundle = {
      resourceType: 'Bundle',
      note: { entry: [{ fake: true }] },
      'x"entry': '[{',
      entry: [{ resource: { id: 'a', t: 'ü "}]{[' } }, { resource: { id: 'b', n: [1, { c: '\\' }] } }],
      after: [{ z: 1 }],
    };
    const buf = Buffer.from(JSON.stringify(bundle, null, 1), 'utf8');
    const parts = bundleEntryRanges(buf).map(([s, e]) => JSON.parse(buf.toString('utf8', s, e)) as unknown);
    expect(parts).toEqual(bundle.entry);
    // Fed in chunks of every small size (boundaries inside keys, escapes and characters), and read from a file.
    for (const size of [1, 2, 3, 5, 7, 64]) {
      const scanner = new BundleEntryScanner();
      const ranges: [number, number][] = [];
      for (let at = 0; at < buf.length; at += size) ranges.push(...scanner.feed(buf.subarray(at, at + size)));
      expect(ranges).toEqual(bundleEntryRanges(buf));
    }
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-scan-')), 'bundle.json');
    fs.writeFileSync(file, buf);
    const fromFile = [...bundleFileEntries(file, 16)].map(
      ([, , bytes]) => JSON.parse(bytes.toString('utf8')) as unknown,
    );
    expect(fromFile).toEqual(bundle.entry);
  });
});

describe('tar.gz reader', () => {
  it('reads regular files with ustar prefixes and pax paths, and refuses a truncated archive', () => {
    const header = (name: string, size: number, type = '0', prefix = ''): Buffer => {
      const h = Buffer.alloc(512);
      h.write(name, 0);
      h.write(size.toString(8).padStart(11, '0'), 124);
      h.write(type, 156);
      h.write('ustar', 257);
      h.write(prefix, 345);
      return h;
    };
    const pad = (n: number) => Buffer.alloc((512 - (n % 512)) % 512);
    const long = `package/${'d'.repeat(120)}/file.json`;
    const pax = Buffer.from(`${long.length + 10} path=${long}\n`); // the length counts itself (3 digits)
    const body = Buffer.from('{"a":1}');
    const tar = Buffer.concat([
      header('x.json', body.length, '0', 'package'),
      body,
      pad(body.length),
      header('PaxHeader', pax.length, 'x'),
      pax,
      pad(pax.length),
      header('ignored', body.length, '0'),
      body,
      pad(body.length),
      header('package/dir', 0, '5'),
      Buffer.alloc(1024),
    ]);
    const entries = readTarGz(zlib.gzipSync(tar));
    expect(entries.map((e) => e.name)).toEqual(['package/x.json', long]);
    expect(entries[0]?.data.toString()).toBe('{"a":1}');
    expect(() => readTarGz(zlib.gzipSync(tar.subarray(0, 515)))).toThrow(/truncated/);
  });
});
