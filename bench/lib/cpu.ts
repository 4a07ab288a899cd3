// Owns measuring CPU time per process from /proc (Linux), so a run can say how many CPU microseconds each
// request cost the server, the database and the load generator: a figure far less noisy than requests/s
// on a shared 2-core machine.
import { readFileSync } from 'node:fs';

const TICK_US = 1e6 / 100; // USER_HZ is 100 on Linux

/** utime+stime of a process and its threads, in microseconds; 0 when it is gone or not Linux. */
export function cpuMicros(pid: number): number {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * TICK_US;
  } catch {
    return 0;
  }
}

export interface CpuSnapshot {
  server: number;
  self: number;
  db: Map<number, number>;
  wall: number;
}

/** CPU counters now; dbPids are the database server processes working for the server under test. */
export async function snapshot(serverPid: number, dbPids: () => Promise<number[]>): Promise<CpuSnapshot> {
  const db = new Map<number, number>();
  for (const p of await dbPids()) db.set(p, cpuMicros(p));
  return { server: cpuMicros(serverPid), self: process.cpuUsage().user + process.cpuUsage().system, db, wall: performance.now() };
}

export interface CpuUse {
  /** Cores used on average during the interval. */
  serverCores: number;
  loadgenCores: number;
  dbCores: number;
  serverUs: number;
  loadgenUs: number;
  dbUs: number;
}

export function diff(a: CpuSnapshot, b: CpuSnapshot): CpuUse {
  let dbUs = 0;
  // A backend that appeared during the interval (a pool connecting lazily) spent all its time in it.
  for (const [p, v] of b.db) dbUs += v - (a.db.get(p) ?? 0);
  const wallUs = (b.wall - a.wall) * 1000;
  const serverUs = b.server - a.server;
  const loadgenUs = b.self - a.self;
  return { serverUs, loadgenUs, dbUs, serverCores: serverUs / wallUs, loadgenCores: loadgenUs / wallUs, dbCores: dbUs / wallUs };
}

/** A measurement starts once the server's CPU (and its database's) stayed below this share of a core over IDLE_WINDOW_MS. */
export const IDLE_SHARE = 0.05;
export const IDLE_WINDOW_MS = 5000;
const IDLE_TIMEOUT_MS = 240_000;

/**
 * Waits until the processes `pids` and `dbPids` name have finished the work earlier measurements left them
 * (as deployed: rendering, verifying and rescoring a ping run's 100,000+ pings), so that the next one
 * measures its own requests. REGRESSION: wrk's cases as deployed were measured while pingd still worked on
 * the cases before (its ping case after the stopped configuration's: 20.7% of bare Fastify against 34.7%
 * alone, PostgreSQL at 287 µs a ping against 44). Returns a note for the row ('' when it was idle at once).
 */
export async function waitIdle(pids: () => number[], dbPids: () => Promise<number[]>, name: string): Promise<string> {
  const started = Date.now();
  const samples: { at: number; us: number }[] = [];
  const total = async () => {
    let us = 0;
    for (const pid of [...pids(), ...(await dbPids())]) us += cpuMicros(pid);
    return us;
  };
  for (;;) {
    samples.push({ at: performance.now(), us: await total() });
    const last = samples[samples.length - 1];
    const first = samples.find((x) => last.at - x.at <= IDLE_WINDOW_MS)!;
    const span = last.at - first.at;
    const share = span > 0 ? (last.us - first.us) / 1000 / span : 1;
    if (span >= IDLE_WINDOW_MS - 500 && share < IDLE_SHARE) {
      const waited = Math.round((Date.now() - started) / 1000);
      return waited > Math.ceil(IDLE_WINDOW_MS / 1000) + 1 ? `started after ${waited} s of ${name} finishing earlier work` : '';
    }
    if (Date.now() - started > IDLE_TIMEOUT_MS)
      return `${name} still at ${Math.round(share * 100)}% of a core after ${IDLE_TIMEOUT_MS / 1000} s: measured busy`;
    await new Promise((r) => setTimeout(r, 500));
  }
}
