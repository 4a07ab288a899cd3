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
