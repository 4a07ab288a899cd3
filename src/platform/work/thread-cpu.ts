// Owns reading the CPU time one thread has used, from Linux's /proc: a task thread says which thread it is
// (/proc/thread-self), and the main thread reads that thread's utime + stime while the task runs. A budget
// counted in CPU time is what a task costs; wall time also counts every moment the thread waited for a
// core, and on a starved machine a small feed's read ran past its budget and was settled too_complex
// (issue 40). Elsewhere than Linux there is no such file: callers fall back to wall time.
import { readFileSync, readlinkSync } from 'node:fs';

/** /proc reports thread times in USER_HZ, which Linux fixes at 100 for user space on every architecture. */
const MS_PER_TICK = 10;

/** This thread's id (Linux), or 0 where /proc/thread-self is not there. */
export function ownThreadId(): number {
  try {
    const m = /\/task\/(\d+)$/.exec(readlinkSync('/proc/thread-self'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** The CPU time (user + system, ms) thread `tid` of this process has used, or null when it cannot be read. */
export function threadCpuMs(tid: number): number | null {
  if (tid <= 0) return null;
  try {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'latin1');
    // The command name (field 2) is in parentheses and may hold spaces: count fields after its last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of stat(5), utime and stime, are the 12th and 13th after the name.
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks * MS_PER_TICK : null;
  } catch {
    return null;
  }
}
