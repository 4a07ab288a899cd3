// Owns reading a V8 .cpuprofile (node --cpu-prof) into the two tables that say where time goes: self time
// by function and by module (package or src/ file), plus inclusive time of chosen functions.
// Usage: node --import tsx bench/profile-summary.ts FILE.cpuprofile [topN] [inclusiveFn,…]
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount: number;
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export function moduleOf(url: string): string {
  if (!url) return '(native/vm)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 13).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  const src = url.indexOf('/src/');
  if (src >= 0 && !url.startsWith('node:')) return url.slice(src + 1);
  if (url.startsWith('node:'))
    return url
      .replace(/^node:internal\/(?:deps\/)?/, 'node:')
      .split('/')
      .slice(0, 2)
      .join('/');
  return url;
}

/** Self time of the frames named fn, grouped by their chain of `depth` callers. */
export function callers(p: Profile, fn: string, depth = 4, top = 15): string {
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) selfUs.set(p.samples[i], (selfUs.get(p.samples[i]) ?? 0) + (p.timeDeltas[i] ?? 0));
  const chains = new Map<string, number>();
  let all = 0;
  for (const [id, us] of selfUs) {
    if (byId.get(id)!.callFrame.functionName !== fn) continue;
    all += us;
    const names: string[] = [];
    for (let cur = parent.get(id); cur !== undefined && names.length < depth; cur = parent.get(cur)) {
      const f = byId.get(cur)!.callFrame;
      names.push(`${f.functionName || '(anon)'}@${f.url.split('/').pop()}:${f.lineNumber + 1}`);
    }
    const k = names.join(' < ');
    chains.set(k, (chains.get(k) ?? 0) + us);
  }
  const lines = [`callers of ${fn} (${(all / 1000).toFixed(0)} ms self):`];
  for (const [k, us] of [...chains].sort((a, b) => b[1] - a[1]).slice(0, top))
    lines.push(`  ${((100 * us) / all).toFixed(1).padStart(5)}%  ${k}`);
  return lines.join('\n');
}

export function summarize(p: Profile, top = 25, inclusive: string[] = []): string {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) selfUs.set(p.samples[i], (selfUs.get(p.samples[i]) ?? 0) + (p.timeDeltas[i] ?? 0));
  const total = [...selfUs.values()].reduce((a, b) => a + b, 0);
  const idle = p.nodes.filter((n) => n.callFrame.functionName === '(idle)').reduce((a, n) => a + (selfUs.get(n.id) ?? 0), 0);
  const busy = total - idle;
  const fn = new Map<string, number>();
  const mod = new Map<string, number>();
  for (const n of p.nodes) {
    const us = selfUs.get(n.id) ?? 0;
    if (!us || n.callFrame.functionName === '(idle)') continue;
    const file = n.callFrame.url.split('/').slice(-1)[0];
    const k = `${n.callFrame.functionName || '(anonymous)'} ${file}:${n.callFrame.lineNumber + 1}`;
    fn.set(k, (fn.get(k) ?? 0) + us);
    const m = moduleOf(n.callFrame.url);
    mod.set(m, (mod.get(m) ?? 0) + us);
  }
  // Inclusive time: a node's self time plus its descendants', counted once per matching subtree root.
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const incl = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const name = byId.get(cur)!.callFrame.functionName;
      if (inclusive.includes(name) && !seen.has(name)) {
        seen.add(name);
        incl.set(name, (incl.get(name) ?? 0) + us);
      }
    }
  }
  const pct = (us: number) => `${((100 * us) / busy).toFixed(1).padStart(5)}%`;
  const lines = [
    `profile: ${(total / 1e6).toFixed(1)} s sampled, busy ${(busy / 1e6).toFixed(1)} s (${((100 * busy) / total).toFixed(0)}%); shares are of busy time`,
    '',
    'self time by module:',
  ];
  for (const [k, us] of [...mod].sort((a, b) => b[1] - a[1]).slice(0, 20)) lines.push(`  ${pct(us)}  ${k}`);
  lines.push('', 'self time by function:');
  for (const [k, us] of [...fn].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`  ${pct(us)}  ${k}`);
  if (inclusive.length) {
    lines.push('', 'inclusive time:');
    for (const name of inclusive) lines.push(`  ${pct(incl.get(name) ?? 0)}  ${name}`);
  }
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [file, top, incl] = process.argv.slice(2);
  if (top === '--callers') {
    console.log(callers(JSON.parse(readFileSync(file, 'utf8')) as Profile, incl, 5));
    process.exit(0);
  }
  if (!file) {
    console.error('usage: profile-summary.ts FILE.cpuprofile [topN] [fnA,fnB]');
    process.exit(2);
  }
  console.log(summarize(JSON.parse(readFileSync(file, 'utf8')) as Profile, Number(top ?? 25), incl ? incl.split(',') : []));
}
