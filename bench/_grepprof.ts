import fs from 'node:fs';
const [f, ...pats] = process.argv.slice(2);
const p = JSON.parse(fs.readFileSync(f!, 'utf8'));
const byId = new Map<number, any>(p.nodes.map((n: any) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
let total = 0; const self = new Map<number, number>();
p.samples.forEach((id: number, i: number) => { self.set(id, (self.get(id) ?? 0) + p.timeDeltas[i]); total += p.timeDeltas[i]; });
const incl = new Map<string, number>();
for (const [id, us] of self) { const seen = new Set<string>();
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) { const cf = byId.get(at).callFrame; const k = `${cf.functionName||'(anon)'} ${cf.url.replace(/^.*\/(node_modules|dist)\//,'')}:${cf.lineNumber+1}`; if (seen.has(k)) continue; seen.add(k); incl.set(k, (incl.get(k) ?? 0) + us); } }
for (const [k, us] of [...incl].filter(([k]) => pats.some((x) => k.includes(x))).sort((a,b)=>b[1]-a[1]).slice(0,40)) console.log(((100*us/total).toFixed(2)+'%').padStart(7), k);
