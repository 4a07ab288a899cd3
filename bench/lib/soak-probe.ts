// Owns what the soak watches besides the load: how old each live document pingd serves is, and how much
// memory pingd (and the PostgreSQL backends serving it) hold.
//
// A document's age is now − its `updated` attribute (the instant it was rendered as of, whole seconds),
// read from the document pingd serves at that moment. It is polled once a second with If-None-Match (a
// 304 keeps the last known `updated`); a new rendering's head is read from the gzip stream and the rest of
// the body is not downloaded. The soak only counts ages while pings keep arriving, and from the load's start
// (a document rendered before the load began is as old as the load, not older), so an unchanged document
// cannot look stale for want of pings.
import { request } from 'node:http';
import { createGunzip } from 'node:zlib';
import { readFileSync } from 'node:fs';

/** One conditional GET of `path`: the served rendering's `updated` (from the document head) and ETag. */
function fetchHead(origin: string, path: string, etag: string): Promise<{ status: number; etag: string; updatedMs: number }> {
  const u = new URL(origin);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { 'accept-encoding': 'gzip', 'user-agent': 'bench-soak/1.0' };
    if (etag) headers['if-none-match'] = etag;
    const req = request({ host: u.hostname, port: u.port, path, headers, agent: false }, (res) => {
      const status = res.statusCode ?? 0;
      const tag = typeof res.headers.etag === 'string' ? res.headers.etag : '';
      if (status !== 200) {
        res.resume();
        res.on('end', () => resolve({ status, etag: tag, updatedMs: NaN }));
        return;
      }
      const gz = res.headers['content-encoding'] === 'gzip';
      const text = gz ? res.pipe(createGunzip()) : res;
      let head = '';
      let settled = false;
      const finish = (updatedMs: number) => {
        if (settled) return;
        settled = true;
        req.destroy();
        resolve({ status, etag: tag, updatedMs });
      };
      text.on('data', (c: Buffer) => {
        head += c.toString('latin1');
        const m = /<weblogUpdates\b[^>]*\bupdated="([^"]+)"/.exec(head);
        if (m) finish(Date.parse(m[1]));
        else if (head.length > 4096) finish(NaN);
      });
      text.on('error', () => finish(NaN));
      text.on('end', () => finish(NaN));
    });
    req.setTimeout(10_000, () => req.destroy(new Error(`GET ${path} took over 10 s`)));
    req.on('error', (e) => reject(e));
    req.end();
  });
}

export interface AgeProbe {
  /** The largest age (s) seen per document since the previous take(), and any probe failures. */
  take(): { maxAge: Record<string, number>; errors: string[] };
  stop(): Promise<void>;
}

/**
 * Polls `paths` every `everyMs` from now on; ages are counted from `fromMs` (epoch ms, the load's start) at
 * the earliest.
 */
export function startAgeProbe(origin: string, paths: string[], fromMs: number, everyMs = 1000): AgeProbe {
  const state = new Map(paths.map((p) => [p, { updatedMs: NaN, etag: '' }]));
  let maxAge: Record<string, number> = Object.fromEntries(paths.map((p) => [p, NaN]));
  let errors: string[] = [];
  let stopped = false;
  const poll = async (path: string) => {
    const s = state.get(path)!;
    try {
      const r = await fetchHead(origin, path, s.etag);
      if (r.status === 200 && Number.isFinite(r.updatedMs)) {
        s.updatedMs = r.updatedMs;
        s.etag = r.etag;
      } else if (r.status !== 304 && r.status !== 200) errors.push(`${path}: status ${r.status}`);
    } catch (e) {
      errors.push(`${path}: ${(e as Error).message}`);
    }
    // Not yet rendered at all: as old as the load.
    const age = (Date.now() - Math.max(fromMs, Number.isFinite(s.updatedMs) ? s.updatedMs : fromMs)) / 1000;
    if (!(maxAge[path] >= age)) maxAge[path] = age;
  };
  const loops = paths.map(async (p) => {
    while (!stopped) {
      const t = Date.now();
      await poll(p);
      await new Promise((r) => setTimeout(r, Math.max(0, everyMs - (Date.now() - t))));
    }
  });
  return {
    take() {
      const out = { maxAge, errors };
      maxAge = Object.fromEntries(paths.map((p) => [p, NaN]));
      errors = [];
      return out;
    },
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

/** A /proc/<pid>/status field in MB (VmRSS, RssAnon, VmHWM…); NaN when the process is gone. */
export function procMb(pid: number, field = 'VmRSS'): number {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}
