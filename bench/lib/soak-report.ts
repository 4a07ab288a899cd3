// Owns presenting the soak: one summary table over every segment (with the PostgreSQL ramp's answer), and
// per segment the table over time (a row per 30 s) and the verdict per bound.
import { percentile } from './soak-load.js';
import { CHANGES, SHORT, maxOf, mmss, rows, type Segment } from './soak-run.js';

const f0 = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–');
const f1 = (n: number) => (Number.isFinite(n) ? (n < 100 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US')) : '–');
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

export function summaryMarkdown(
  segments: Segment[],
  ramp: { held: number | null; brokeAt: number | null; ran: boolean },
  steps: number[],
  errors: string[],
): string {
  const out = [
    '| run | load avg (start → end) | accepted/s | p50 / p99 ms | max age shortChanges / changes s | pingd RSS MB (idle → peak) | failures | rows / acks | bounds |',
    '| --- | --- | ---: | --- | --- | --- | ---: | --- | --- |',
  ];
  for (const s of segments) {
    const lat = s.samples.flatMap((x) => x.latencies);
    const secs = sum(s.samples.map((x) => x.seconds));
    const broken = s.verdicts.filter((v) => !v.met).map((v) => v.bound);
    out.push(
      `| ${s.label}, ${s.seconds} s | ${s.loadStart} → ${s.loadEnd} | ${f0(s.acks / secs)} | ${f1(percentile(lat, 50))} / ${f1(percentile(lat, 99))} | ${f1(maxOf(s.samples.map((x) => x.age[SHORT])))} / ${f1(maxOf(s.samples.map((x) => x.age[CHANGES])))} | ${f0(s.idleRssMb)} → ${f0(s.peakRssMb)} | ${sum([...s.failures.values()])} | ${s.verdicts.find((v) => v.bound.startsWith('every acknowledged'))?.met ? '✅' : '❌'} ${f0(s.rows)} / ${f0(s.acks)} | ${broken.length ? `❌ ${broken.join('; ')}` : '✅ all met'} |`,
    );
  }
  const lines = [out.join('\n')];
  if (ramp.ran) {
    const tried = steps.length ? ` (steps ${steps.join(', ')}/s)` : '';
    if (ramp.held === null) lines.push('', `**PostgreSQL ramp**${tried}: the base rate already broke a bound; no step was run.`);
    else if (ramp.brokeAt === null)
      lines.push(
        '',
        `**PostgreSQL ramp**${tried}: every step held; the highest sustained rate is at least **${ramp.held}/s** (not higher steps tried).`,
      );
    else
      lines.push(
        '',
        `**PostgreSQL ramp**${tried}: the bounds held up to **${ramp.held}/s**; the step at ${ramp.brokeAt}/s broke them (the ramp stops there), so the highest sustained rate lies between the two.`,
      );
  }
  if (errors.length) lines.push('', `Errors: ${errors.join('; ')}`);
  return lines.join('\n');
}

export function segmentMarkdown(s: Segment, sampleSec: number): string {
  const docs = [...new Set(s.samples.flatMap((x) => Object.keys(x.renderMs)))].sort();
  const out = [
    `#### ${s.label} (${s.seconds} s, ${s.connections} connections)`,
    '',
    `Load average ${s.loadStart} at the start, ${s.loadEnd} at the end. Sent ${f0(s.sent)} pings, ${f0(s.acks)} acknowledged, ${sum([...s.failures.values()])} failed${s.failures.size ? ` (${[...s.failures].map(([k, n]) => `${n} × ${k}`).join(', ')})` : ''}; ${f0(s.rows)} rows in \`pings\` afterwards. pingd RSS ${f0(s.idleRssMb)} MB idle, peak ${f0(s.peakRssMb)} MB (VmHWM). CPU per acknowledged ping: pingd ${f0(s.pingdUsPerPing)} µs, the bench process (load generator and probes) ${f0(s.clientUsPerPing)} µs.`,
    '',
    `| t | accepted/s | p50 ms | p99 ms | failures | pingd RSS MB${s.backend === 'postgres' ? ' | PG backends MB' : ''} | max age shortChanges s | max age changes s | ${docs.map((d) => `render ms ${d} (n)`).join(' | ')} |`,
    `| ---: | ---: | ---: | ---: | ---: | ---: |${s.backend === 'postgres' ? ' ---: |' : ''} ---: | ---: |${docs.map(() => ' ---: |').join('')}`,
  ];
  for (const g of rows(s.samples, sampleSec)) {
    const secs = sum(g.map((x) => x.seconds));
    const lat = g.flatMap((x) => x.latencies);
    const nf = sum(g.map((x) => sum([...x.failures.values()])));
    const render = docs.map((d) => {
      const n = sum(g.map((x) => x.renders[d] ?? 0));
      const ms = n ? sum(g.map((x) => (x.renders[d] ? x.renderMs[d] * x.renders[d] : 0))) / n : NaN;
      return `${f0(ms)} (${n})`;
    });
    out.push(
      `| ${mmss(g[g.length - 1].t)} | ${f0(sum(g.map((x) => x.acks)) / secs)} | ${f1(percentile(lat, 50))} | ${f1(percentile(lat, 99))} | ${nf} | ${f0(maxOf(g.map((x) => x.rssMb)))} |${s.backend === 'postgres' ? ` ${f0(maxOf(g.map((x) => x.pgMb)))} |` : ''} ${f1(maxOf(g.map((x) => x.age[SHORT])))} | ${f1(maxOf(g.map((x) => x.age[CHANGES])))} | ${render.join(' | ')} |`,
    );
  }
  out.push('', '| bound | met | worst | when it broke |', '| --- | --- | --- | --- |');
  for (const v of s.verdicts) out.push(`| ${v.bound} | ${v.met ? '✅' : '❌'} | ${v.worst} | ${v.when ?? ''} |`);
  const probeErrors = s.samples.flatMap((x) => x.probeErrors);
  if (probeErrors.length)
    out.push('', `Document probe errors (${probeErrors.length}): ${[...new Set(probeErrors)].slice(0, 5).join('; ')}`);
  return out.join('\n');
}
