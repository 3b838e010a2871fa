// Search paging through HTTP (issue 14 point 3): `_offset` with `_count` (bounded by MAX_OFFSET), and `first`,
// `previous` and `next` links that walk every match once; cursor pages name their first page too.
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_OFFSET } from '../../src/fhir/search/parse.js';
import { testDatabases } from '../support/db.js';
import { createEntry, postBundle, useProjectApp } from '../support/app.js';

type Bundle = {
  total?: number;
  link: { relation: string; url: string }[];
  entry?: { resource: { id: string } }[];
};

describe.each(testDatabases())('search paging on $name', (database) => {
  const ctx = useProjectApp(database);
  const family = `Pager${Date.now()}`;
  let all: string[] = [];

  const get = async (url: string): Promise<Bundle> => {
    const res = await ctx.t.request({
      method: 'GET',
      url: url.replace('http://cinder.test', ''),
      token: ctx.token,
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as Bundle;
  };
  const link = (b: Bundle, relation: string): string | undefined =>
    b.link.find((l) => l.relation === relation)?.url;
  const ids = (b: Bundle): string[] => (b.entry ?? []).map((e) => e.resource.id);

  beforeAll(async () => {
    const res = await postBundle(
      ctx.t,
      ctx.token,
      'transaction',
      Array.from({ length: 7 }, (_, i) =>
        createEntry({ resourceType: 'Patient', name: [{ family, given: [`G${i}`] }] }),
      ),
    );
    expect(res.statusCode).toBe(200);
    all = ids(await get(`${ctx.t.fhir}/Patient?family=${family}&_count=100`));
    expect(all).toHaveLength(7);
  });

  it('pages with _offset and _count, following next and previous links', async () => {
    const first = await get(`${ctx.t.fhir}/Patient?family=${family}&_count=3&_offset=0`);
    expect(ids(first)).toEqual(all.slice(0, 3));
    expect(link(first, 'previous')).toBeUndefined();
    const seen = [...ids(first)];
    let page = first;
    const pages: Bundle[] = [first];
    for (let next = link(page, 'next'); next; next = link(page, 'next')) {
      expect(new URL(next).searchParams.get('_offset')).toBe(String(seen.length));
      page = await get(next);
      pages.push(page);
      seen.push(...ids(page));
      expect(new URL(link(page, 'first') as string).searchParams.get('_offset')).toBeNull();
    }
    expect(seen).toEqual(all);
    expect(pages).toHaveLength(3);
    const last = pages[2] as Bundle;
    expect(last.total).toBe(7);
    const back = await get(link(last, 'previous') as string);
    expect(ids(back)).toEqual(all.slice(3, 6));
    expect(ids(await get(link(back, 'previous') as string))).toEqual(all.slice(0, 3));
    expect(ids(await get(link(last, 'first') as string))).toEqual(all.slice(0, 3));
  });

  it('reports the real number of matches as total on a page past the last match', async () => {
    for (const offset of [7, 10, MAX_OFFSET]) {
      const page = await get(`${ctx.t.fhir}/Patient?family=${family}&_count=3&_offset=${offset}`);
      expect(ids(page), `_offset=${offset}`).toEqual([]);
      expect(page.total, `_offset=${offset}`).toBe(7);
      expect(link(page, 'next')).toBeUndefined();
    }
    // A short last page counts on from its offset; no match at all is 0 at any offset.
    expect((await get(`${ctx.t.fhir}/Patient?family=${family}&_count=3&_offset=5`)).total).toBe(7);
    expect((await get(`${ctx.t.fhir}/Patient?family=Nobody${family}&_offset=40`)).total).toBe(0);
  });

  it('names the first page on cursor pages too', async () => {
    const first = await get(`${ctx.t.fhir}/Patient?family=${family}&_count=4`);
    const second = await get(link(first, 'next') as string);
    expect(ids(second)).toEqual(all.slice(4));
    expect(ids(await get(link(second, 'first') as string))).toEqual(all.slice(0, 4));
  });

  it('walks cursor pages back with previous links, in the default order and with _sort', async () => {
    for (const sort of ['', '&_sort=-given', '&_sort=birthdate,_id']) {
      const base = `${ctx.t.fhir}/Patient?family=${family}${sort}`;
      const order = ids(await get(`${base}&_count=100`));
      expect(order).toHaveLength(7);
      const pages: Bundle[] = [await get(`${base}&_count=3`)];
      expect(link(pages[0] as Bundle, 'previous'), sort).toBeUndefined();
      for (let next = link(pages[pages.length - 1] as Bundle, 'next'); next;) {
        const page = await get(next);
        pages.push(page);
        next = link(page, 'next');
      }
      expect(pages.flatMap(ids), sort).toEqual(order);
      // From the last page back to the first: the same pages, and no previous link on the first.
      let page = pages[pages.length - 1] as Bundle;
      for (let i = pages.length - 2; i >= 0; i--) {
        page = await get(link(page, 'previous') as string);
        expect(ids(page), `${sort} page ${i}`).toEqual(ids(pages[i] as Bundle));
      }
      expect(link(page, 'previous'), sort).toBeUndefined();
      // A page reached backwards pages forwards again.
      expect(ids(await get(link(page, 'next') as string))).toEqual(ids(pages[1] as Bundle));
    }
  });

  it('orders a string search without _sort by the matched value: each match once, on every page, both ways', async () => {
    // Families sharing a prefix; ties on one value; a Patient with two matching names (taken at its smaller
    // one); a Patient whose given and family both match `name=` (once).
    const p = `Drv${Date.now()}`;
    // The same tag twice on one Patient: a token search finds it once.
    const tag = [
      { system: 'https://example.org/drv', code: p },
      { system: 'https://example.org/drv', code: p },
    ];
    const people = [
      { family: `${p}c`, given: ['A'] },
      { family: `${p}a`, given: ['B'] },
      { family: `${p}b`, given: ['C'] },
      { family: `${p}a`, given: ['D'] },
      { family: `${p}d`, given: [`${p}x`] },
      { family: `${p}a`, given: ['E'] },
    ];
    const res = await postBundle(ctx.t, ctx.token, 'transaction', [
      ...people.map((n) => createEntry({ resourceType: 'Patient', name: [n], meta: { tag } })),
      createEntry({
        resourceType: 'Patient',
        meta: { tag },
        name: [
          { family: `${p}zz`, given: ['F'] },
          { family: `${p}b`, given: ['G'] },
        ],
      }),
    ]);
    expect(res.statusCode).toBe(200);
    // Another project's Patient with the same prefix is never on these pages.
    const other = (await ctx.t.newProject()).adminToken;
    const theirs = await ctx.t.request({
      method: 'POST',
      url: `${ctx.t.fhir}/Patient`,
      token: other,
      payload: { resourceType: 'Patient', name: [{ family: `${p}a` }] },
    });
    expect(theirs.statusCode).toBe(201);
    const theirId = (theirs.json() as { id: string }).id;

    type Named = { id: string; name: { family: string; given?: string[] }[] };
    const families = (b: Bundle): string[] =>
      ((b.entry ?? []) as unknown as { resource: Named }[]).map(
        (e) => e.resource.name.map((n) => n.family).sort()[0] as string,
      );
    for (const param of ['family', 'name', '_tag']) {
      const value = param === '_tag' ? `https://example.org/drv|${p}` : p;
      const base = `${ctx.t.fhir}/Patient?${param}=${encodeURIComponent(value)}`;
      const whole = await get(`${base}&_count=100`);
      expect(ids(whole), param).toHaveLength(7);
      expect(new Set(ids(whole)).size).toBe(7);
      expect(ids(whole)).not.toContain(theirId);
      // In the order of the (smallest) matched value; a token's in the order they were created.
      const fams = families(whole);
      if (param !== '_tag') {
        expect(fams, param).toEqual([...fams].sort());
        expect(fams[0]).toBe(`${p}a`);
      }
      // Pages of 2 forwards, then back from the last one: the same rows, each once.
      const pages: Bundle[] = [await get(`${base}&_count=2`)];
      for (let next = link(pages[pages.length - 1] as Bundle, 'next'); next;) {
        const page = await get(next);
        pages.push(page);
        next = link(page, 'next');
      }
      expect(pages.flatMap(ids), param).toEqual(ids(whole));
      let page = pages[pages.length - 1] as Bundle;
      for (let i = pages.length - 2; i >= 0; i--) {
        page = await get(link(page, 'previous') as string);
        expect(ids(page), `${param} page ${i}`).toEqual(ids(pages[i] as Bundle));
      }
      // _offset pages agree, and :exact keeps to one value.
      expect(ids(await get(`${base}&_count=3&_offset=3`))).toEqual(ids(whole).slice(3, 6));
    }
    const exact = await get(`${ctx.t.fhir}/Patient?family:exact=${p}a&_count=1`);
    expect(exact.entry).toHaveLength(1);
    const rest = await get(link(exact, 'next') as string);
    const third = await get(link(rest, 'next') as string);
    expect(link(third, 'next')).toBeUndefined();
    expect(new Set([...ids(exact), ...ids(rest), ...ids(third)]).size).toBe(3);
  });

  it('pages history with first, previous and next links', async () => {
    const id = all[0] as string;
    for (let v = 0; v < 4; v++) {
      const res = await ctx.t.request({
        method: 'PUT',
        url: `${ctx.t.fhir}/Patient/${id}`,
        token: ctx.token,
        payload: { resourceType: 'Patient', id, name: [{ family, given: [`V${v}`] }] },
      });
      expect(res.statusCode).toBe(200);
    }
    const versions = (b: Bundle): string[] =>
      (b.entry ?? []).map((e) => (e as unknown as { response: { etag: string } }).response.etag);
    const allVersions = versions(await get(`${ctx.t.fhir}/Patient/${id}/_history?_count=100`));
    expect(allVersions).toHaveLength(5);
    const first = await get(`${ctx.t.fhir}/Patient/${id}/_history?_count=2`);
    expect(link(first, 'previous')).toBeUndefined();
    const second = await get(link(first, 'next') as string);
    const third = await get(link(second, 'next') as string);
    expect([...versions(first), ...versions(second), ...versions(third)]).toEqual(allVersions);
    expect(link(third, 'next')).toBeUndefined();
    expect(versions(await get(link(third, 'previous') as string))).toEqual(versions(second));
    expect(versions(await get(link(third, 'first') as string))).toEqual(versions(first));
  });

  it("answers a system history of the project's changes only", async () => {
    const sys = await get(`${ctx.t.fhir}/_history?_count=1000`);
    const entries = (sys.entry ?? []) as unknown as { fullUrl: string; request: { method: string } }[];
    for (const id of all) expect(entries.some((e) => e.fullUrl.endsWith(`/Patient/${id}`))).toBe(true);
    // Another project's system history holds none of them.
    const other = (await ctx.t.newProject()).adminToken;
    const res = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/_history?_count=1000`,
      token: other,
    });
    expect(res.statusCode).toBe(200);
    const theirs = (res.json() as Bundle).entry ?? [];
    expect(theirs.some((e) => all.includes(e.resource?.id))).toBe(false);
    // Paged like type history.
    const first = await get(`${ctx.t.fhir}/_history?_count=2`);
    expect(first.entry).toHaveLength(2);
    expect(link(first, 'next')).toContain('_offset=2');
    // Newest first across the types (each type's newest, merged), and the pages add up to the whole list.
    const key = (e: unknown): string => {
      const x = e as { fullUrl: string; response: { etag: string; lastModified: string } };
      return `${x.response.lastModified} ${x.fullUrl} ${x.response.etag}`;
    };
    const whole = (sys.entry ?? []).map(key);
    const stamps = whole.map((k) => k.split(' ')[0] as string);
    expect([...stamps].sort().reverse()).toEqual(stamps);
    const types = new Set(whole.map((k) => (k.split(' ')[1] as string).split('/').at(-2)));
    expect(types.size).toBeGreaterThan(1);
    const paged: string[] = [];
    let page: Bundle | undefined = await get(`${ctx.t.fhir}/_history?_count=3`);
    for (let i = 0; page && i < 6; i++) {
      paged.push(...(page.entry ?? []).map(key));
      const next = link(page, 'next');
      page = next ? await get(next) : undefined;
    }
    expect(paged).toEqual(whole.slice(0, paged.length));
    expect(paged.length).toBe(Math.min(18, whole.length));
  });

  it('refuses an offset beyond the maximum, a negative one, and _offset with _cursor', async () => {
    for (const q of [`_offset=${MAX_OFFSET + 1}`, '_offset=-1', '_offset=x', '_offset=0&_cursor=abc']) {
      const res = await ctx.t.request({
        method: 'GET',
        url: `${ctx.t.fhir}/Patient?family=${family}&${q}`,
        token: ctx.token,
      });
      expect(res.statusCode, q).toBe(400);
      expect(res.json().resourceType).toBe('OperationOutcome');
    }
    const deep = await get(`${ctx.t.fhir}/Patient?family=${family}&_offset=${MAX_OFFSET}`);
    expect(ids(deep)).toEqual([]);
  });
});
