// Owns reading V8 CPU profiles of a benchmark run (node --cpu-prof): the timed window's samples, frames mapped
// back to src/ (tsx's cache or tsc's .js.map), µs per request by module, by pingd source file and by
// function, and the table comparing pingd with the baseline. Used by the wrk scenario and its --analyse.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { SourceMap, type SourceMapPayload } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { tmpdir } from 'node:os';
import { summarize, moduleOf } from '../profile-summary.js';
import { PINGD_ROOT } from './servers.js';

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount: number;
  children?: number[];
}
export interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** The profile's samples taken between t0 and t1 (µs, CLOCK_MONOTONIC, V8's clock on Linux); all of them when none fall inside. */
/** The profile's samples inside any of the spans ([from, to] in µs of the monotonic clock, monoUs); the rest dropped. */
export function within(p: Profile, spans: readonly [number, number][]): Profile {
  const samples: number[] = [];
  const deltas: number[] = [];
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    if (spans.some(([a, b]) => t >= a && t <= b)) {
      samples.push(p.samples[i]);
      deltas.push(p.timeDeltas[i] ?? 0);
    }
  }
  return { ...p, samples, timeDeltas: deltas };
}

export function window(p: Profile, t0: number, t1: number): { p: Profile; windowed: boolean } {
  const w = within(p, [[t0, t1]]);
  if (w.samples.length < 100) return { p, windowed: false };
  return { p: w, windowed: true };
}

/**
 * pingd's frames named by source file and line: `src/<path>.ts` and the original line. Under tsx each file
 * is compiled to one or two long lines, so a profile's positions say nothing until mapped back through the
 * source map tsx keeps with the compiled code in its cache (/tmp/tsx-<uid>/, JSON {code, map}; of several
 * cached versions of a file, the one with the profile's named functions at the profile's positions is taken).
 * Compiled pingd (tsc output under `<dist>/`) has its .js.map beside each file.
 */
export function normalise(p: Profile, dist: string | undefined): Profile {
  type Frame = ProfileNode['callFrame'] & { columnNumber?: number };
  const distUrl = dist ? pathToFileURL(dist).href + '/' : undefined;
  const isPingd = (url: string) => url.includes('/src/') || (distUrl !== undefined && url.startsWith(distUrl));
  const tsxDir = join(tmpdir(), `tsx-${process.getuid?.() ?? 0}`);
  let tsx: Map<string, { code: string; map: SourceMapPayload }[]> | undefined;
  const tsxEntries = () => {
    if (tsx) return tsx;
    tsx = new Map();
    try {
      for (const name of readdirSync(tsxDir)) {
        try {
          const j = JSON.parse(readFileSync(join(tsxDir, name), 'utf8')) as { code?: string; map?: SourceMapPayload };
          const src = j.map?.sources?.[0];
          if (j.code && src) tsx.set(src, [...(tsx.get(src) ?? []), { code: j.code, map: j.map! }]);
        } catch {
          /* not one of tsx's entries */
        }
      }
    } catch {
      /* no cache */
    }
    return tsx;
  };
  const frames = new Map<string, Frame[]>();
  for (const n of p.nodes) if (isPingd(n.callFrame.url)) frames.set(n.callFrame.url, [...(frames.get(n.callFrame.url) ?? []), n.callFrame]);
  const maps = new Map<string, SourceMap | undefined>();
  const mapFor = (url: string): SourceMap | undefined => {
    if (maps.has(url)) return maps.get(url);
    const path = fileURLToPath(url);
    let m: SourceMap | undefined;
    if (distUrl && url.startsWith(distUrl)) {
      try {
        m = new SourceMap(JSON.parse(readFileSync(`${path}.map`, 'utf8')) as SourceMapPayload);
      } catch {
        m = undefined;
      }
    } else {
      let best: { score: number; map: SourceMapPayload } | undefined;
      for (const c of tsxEntries().get(path) ?? []) {
        const lines = c.code.split('\n');
        let score = 0;
        for (const f of frames.get(url) ?? []) {
          const line = lines[f.lineNumber] ?? '';
          const col = f.columnNumber ?? 0;
          if (
            f.functionName &&
            f.functionName !== '__name' &&
            line.slice(Math.max(0, col - f.functionName.length - 16), col).includes(f.functionName)
          )
            score++;
        }
        if (!best || score > best.score) best = { score, map: c.map };
      }
      m = best ? new SourceMap(best.map) : undefined;
    }
    maps.set(url, m);
    return m;
  };
  const nodes = p.nodes.map((n) => {
    const f = n.callFrame as Frame;
    if (!isPingd(f.url)) return n;
    const e = mapFor(f.url)?.findEntry(f.lineNumber, f.columnNumber ?? 0) as { originalLine?: number } | undefined;
    const line = e && typeof e.originalLine === 'number' ? e.originalLine : -1;
    let url = f.url;
    if (distUrl && url.startsWith(distUrl)) url = `file://${join(PINGD_ROOT, 'src', url.slice(distUrl.length).replace(/\.js$/, '.ts'))}`;
    return { ...n, callFrame: { ...f, url, lineNumber: line, columnNumber: 0 } };
  });
  return { ...p, nodes };
}

export const monoUs = () => Number(process.hrtime.bigint() / 1000n);

/** pingd's source files, and the baseline's one-line handler (so that both are split alike). */
const isApp = (m: string) => m.startsWith('src/') || m === 'bench/baseline-server.ts';

/** Fastify's lifecycle steps, called from a hook's or a body parser's done(). */
function continuation(f: ProfileNode['callFrame']): boolean {
  const i = f.url.indexOf('node_modules/fastify/lib/');
  if (i < 0) return false;
  const file = f.url.slice(i + 25);
  return (
    file === 'handle-request.js' ||
    (file === 'hooks.js' && f.functionName === 'next') ||
    (file === 'route.js' && f.functionName === 'runPreParsing') ||
    (file === 'reply.js' && f.functionName === 'onResponseCallback')
  );
}

/** Where a frame belongs: a pingd source file (src/…), a package, or a part of Node. */
function owner(url: string): string {
  return url.endsWith('/bench/baseline-server.ts') ? 'bench/baseline-server.ts' : moduleOf(url);
}

/**
 * µs per request: self time by module; self time charged to the nearest pingd source file on the stack
 * (what each of pingd's modules costs with the libraries it calls), the rest to the stack's module; and the
 * inclusive time of pingd's own functions (hooks and handlers among them).
 */
export interface PerRequest {
  busyUs: number;
  /** Self time of pingd's own code (src/), of what pingd's code called (packages, Node), and of the rest (Fastify, Node, V8 outside any pingd frame). */
  own: number;
  under: number;
  stack: number;
  modules: Map<string, number>;
  /** Per pingd source file: its own self time and the self time of what it called. */
  charged: Map<string, { own: number; under: number }>;
  functions: Map<string, number>;
  /** Self time by function, all of them (for the difference with the baseline). */
  fnSelf: Map<string, number>;
}

export function perRequest(p: Profile, requests: number, top = 18): PerRequest {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const selfUs = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) selfUs.set(p.samples[i], (selfUs.get(p.samples[i]) ?? 0) + (p.timeDeltas[i] ?? 0));
  const modules = new Map<string, number>();
  const charged = new Map<string, { own: number; under: number }>();
  const functions = new Map<string, number>();
  const fnSelf = new Map<string, number>();
  let busy = 0;
  let own = 0;
  let under = 0;
  const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);
  for (const [id, us] of selfUs) {
    const n = byId.get(id)!;
    const name = n.callFrame.functionName;
    if (name === '(idle)') continue;
    busy += us;
    const leaf = owner(n.callFrame.url);
    add(modules, n.callFrame.url ? leaf : name.startsWith('(') ? name : leaf, us);
    add(
      fnSelf,
      `${name || '(anonymous)'} ${n.callFrame.url.split('/').pop()}${n.callFrame.url ? `:${n.callFrame.lineNumber + 1}` : ''}`,
      us,
    );
    let src: string | undefined;
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)!.callFrame;
      // What runs inside a hook's done() or a body parser's done() is the next step of Fastify's
      // lifecycle, not the hook's work: the walk stops there.
      if (continuation(f)) break;
      const m = owner(f.url);
      if (isApp(m)) {
        src ??= m;
        const k = `${f.functionName || '(anonymous)'} ${m}:${f.lineNumber >= 0 ? f.lineNumber + 1 : '?'}`;
        if (!seen.has(k)) {
          seen.add(k);
          add(functions, k, us);
        }
      }
    }
    if (src) {
      const c = charged.get(src) ?? { own: 0, under: 0 };
      if (leaf === src) {
        c.own += us;
        own += us;
      } else {
        c.under += us;
        under += us;
      }
      charged.set(src, c);
    }
  }
  const scale = (m: Map<string, number>) =>
    new Map(
      [...m]
        .sort((a, b) => b[1] - a[1])
        .slice(0, top)
        .map(([k, v]) => [k, v / requests]),
    );
  return {
    busyUs: busy / requests,
    own: own / requests,
    under: under / requests,
    stack: (busy - own - under) / requests,
    modules: scale(modules),
    charged: new Map(
      [...charged]
        .sort((a, b) => b[1].own + b[1].under - a[1].own - a[1].under)
        .slice(0, top)
        .map(([k, v]) => [k, { own: v.own / requests, under: v.under / requests }]),
    ),
    functions: scale(functions),
    fnSelf: new Map([...fnSelf].map(([k, v]) => [k, v / requests])),
  };
}

/**
 * The profiles a process left in `dir`: its main thread's and each worker thread's (the embedded database's,
 * verification's parsers). Node names them CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile, thread 0 the
 * main one. (Taking the largest file for the main thread's was wrong as soon as the database's thread was
 * busier: an "as deployed" profile then showed pingd's own code at 0.4 µs a request.)
 */
export function threadProfiles(dir: string): { main?: Profile; workers: { name: string; profile: Profile }[] } {
  if (!existsSync(dir)) return { workers: [] };
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  const thread = (f: string) => Number(f.split('.').at(-3));
  const read = (f: string) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as Profile;
  const main = files.find((f) => thread(f) === 0) ?? files.sort((a, b) => statSync(join(dir, b)).size - statSync(join(dir, a)).size)[0];
  return {
    main: main ? read(main) : undefined,
    workers: files.filter((f) => f !== main).map((f) => ({ name: `thread ${thread(f)}`, profile: read(f) })),
  };
}

/** The main thread's profile (see threadProfiles). */
export function latestProfile(dir: string): Profile | undefined {
  return threadProfiles(dir).main;
}

/** CPU busy per request in each worker thread during the window: where a request's work went off the main thread. */
export function workerLines(workers: { name: string; profile: Profile }[], t0: number, t1: number, requests: number): string {
  if (!workers.length) return '';
  const parts = workers.map((w) => {
    const p = window(w.profile, t0, t1).p;
    const busy = perRequest(p, requests).busyUs;
    const top = [...perRequest(p, requests, 3).modules].map(([k, v]) => `${k} ${us1(v)}`).join(', ');
    return `${w.name} **${us1(busy)} µs**${top ? ` (${top})` : ''}`;
  });
  return `Worker threads, CPU busy per request in the same window: ${parts.join('; ')}.`;
}

const us1 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '–' : n < 10 ? n.toFixed(1) : Math.round(n).toString());

export function profileTable(title: string, pingd: PerRequest, base: PerRequest | undefined): string {
  const out = [
    `#### ${title}`,
    '',
    `CPU busy per request under the profiler: pingd **${us1(pingd.busyUs)} µs** = its own code ${us1(pingd.own)} + what its code called (packages, Node: the reply's write among them) ${us1(pingd.under)} + the stack outside pingd's frames (Fastify's lifecycle, Node's HTTP, V8, GC) ${us1(pingd.stack)}` +
      (base
        ? `; baseline **${us1(base.busyUs)} µs** = its handler ${us1(base.own)} + what the handler called ${us1(base.under)} + the stack ${us1(base.stack)}.`
        : '.'),
    '',
  ];
  out.push('| self time by module | pingd µs/req | baseline µs/req |', '| --- | ---: | ---: |');
  const keys = [...new Set([...pingd.modules.keys(), ...(base ? [...base.modules.keys()].slice(0, 8) : [])])];
  for (const k of keys) out.push(`| ${k} | ${us1(pingd.modules.get(k))} | ${base ? us1(base.modules.get(k)) : ''} |`);
  out.push('', '| pingd source file (nearest on the stack) | own code µs/req | what it called µs/req |', '| --- | ---: | ---: |');
  for (const [k, v] of pingd.charged) out.push(`| ${k} | ${us1(v.own)} | ${us1(v.under)} |`);
  out.push('', '| pingd function (inclusive, hooks and handlers among them) | µs/req |', '| --- | ---: |');
  for (const [k, v] of pingd.functions) out.push(`| ${k} | ${us1(v)} |`);
  if (base) {
    const d = [...new Set([...pingd.fnSelf.keys(), ...base.fnSelf.keys()])]
      .map((k) => ({ k, p: pingd.fnSelf.get(k) ?? 0, b: base.fnSelf.get(k) ?? 0 }))
      .sort((x, y) => y.p - y.b - (x.p - x.b));
    out.push('', '| function (self time), largest excess over the baseline | pingd µs/req | baseline µs/req |', '| --- | ---: | ---: |');
    for (const r of d.slice(0, 25)) out.push(`| ${r.k} | ${us1(r.p)} | ${us1(r.b)} |`);
  }
  return out.join('\n');
}

export const INCLUSIVE = [
  'serveDocument',
  'decide',
  'negotiateEncoding',
  'parseMethodCall',
  'fastParseMethodCall',
  'validatePing',
  'accept',
  'insertPingBatch',
  'flush',
  'runPreParsing',
  'handleRequest',
  'onSendEnd',
  'writeHead',
];

/** Summarises the profiles a profiled run left (window.json in each directory). */
export function analyse(dirP: string, dirB: string | undefined): string {
  const read = (d: string) => JSON.parse(readFileSync(join(d, 'window.json'), 'utf8')) as { requests: number; profile: Profile };
  return profileText(dirP, read(dirP), dirB ? read(dirB) : undefined);
}

/** Summarises the profiled window of a run, as the wrk scenario prints it. */
export function profileText(
  head: string,
  pingd: { requests: number; profile: Profile },
  base?: { requests: number; profile: Profile },
): string {
  return [
    profileTable(head, perRequest(pingd.profile, pingd.requests), base ? perRequest(base.profile, base.requests) : undefined),
    '',
    '```',
    summarize(pingd.profile, 30, INCLUSIVE),
    '```',
  ].join('\n');
}
