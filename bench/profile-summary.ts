// Summarises V8 .cpuprofile files (node --cpu-prof): the functions with the most self time, and self time per
// package / source area. `npx tsx bench/profile-summary.ts /tmp/prof/*.cpuprofile [top] [--last=S]`
// `--last=S`: only the samples of the last S seconds of each profile (e.g. the one test of bench/hot-paths.ts that ran
// last, HOT_TESTS=read, without the server's start and the loading of the Patients).
import fs from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
  endTime: number;
  startTime: number;
}

function area(url: string): string {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1] as string;
  const d = /\/dist\/(.*)$/.exec(url);
  if (d) return `cinder:${(d[1] as string).split('/').slice(0, 2).join('/')}`;
  if (url.startsWith('node:')) return url;
  return url === '' ? '(native/vm)' : 'other';
}

const files = process.argv.slice(2).filter((a) => a.endsWith('.cpuprofile'));
const top = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 30);
const last = Number(
  /^--last=(\d+(?:\.\d+)?)$/.exec(process.argv.find((a) => a.startsWith('--last=')) ?? '')?.[1] ?? 0,
);
for (const f of files) {
  const p = JSON.parse(fs.readFileSync(f, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  let total = 0;
  const from = last > 0 ? p.endTime - last * 1e6 : -Infinity;
  let at = p.startTime;
  p.samples.forEach((id, i) => {
    const dt = p.timeDeltas[i] ?? 0;
    at += dt;
    if (at < from) return;
    self.set(id, (self.get(id) ?? 0) + dt);
    total += dt;
  });
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const label = (cf: Node['callFrame']): string =>
    `${cf.functionName || '(anonymous)'} ${cf.url.replace(/^.*\/(node_modules|dist)\//, '$1/')}:${cf.lineNumber + 1}`;
  // Inclusive time: each sample counts once for every distinct function on its stack.
  const incl = new Map<string, number>();
  for (const [id, us] of self) {
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const k = label((byId.get(at) as Node).callFrame);
      if (seen.has(k)) continue;
      seen.add(k);
      incl.set(k, (incl.get(k) ?? 0) + us);
    }
  }
  const fns = new Map<string, number>();
  const areas = new Map<string, number>();
  for (const [id, us] of self) {
    const cf = (byId.get(id) as Node).callFrame;
    const key = label(cf);
    fns.set(key, (fns.get(key) ?? 0) + us);
    const a = area(cf.url);
    areas.set(a, (areas.get(a) ?? 0) + us);
  }
  const pct = (us: number): string => `${((100 * us) / total).toFixed(1)}%`;
  console.log(`\n${f}: ${(total / 1e6).toFixed(1)} s sampled`);
  console.log('-- self time by function');
  for (const [k, us] of [...fns].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`${pct(us).padStart(6)}  ${k}`);
  console.log('-- inclusive time (JS functions of cinder, fastify, pino, pg)');
  for (const [k, us] of [...incl]
    .filter(([k]) => /dist\/|fastify|pino|pg|find-my-way|jose/.test(k))
    .sort((a, b) => b[1] - a[1])
    .slice(0, top))
    console.log(`${pct(us).padStart(6)}  ${k}`);
  console.log('-- self time by area');
  for (const [k, us] of [...areas].sort((a, b) => b[1] - a[1]).slice(0, 25))
    console.log(`${pct(us).padStart(6)}  ${k}`);
}
