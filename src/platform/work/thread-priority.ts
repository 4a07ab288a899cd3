// Owns lowering the priority of the calling thread, for worker threads doing background work beside the
// event loop that answers pings. On Linux each thread has its own nice value (setpriority on a thread id
// affects that thread only, a known departure from POSIX), and /proc/thread-self names the caller's id.
// Elsewhere this does nothing.
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';

/**
 * Sets the calling thread's nice value (10 by default: under CFS a nice-0 thread then gets ~9× its CPU
 * share when both want the core). Returns whether it took effect.
 */
export function lowerThreadPriority(nice = 10): boolean {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (!Number.isInteger(tid) || tid <= 0) return false;
    setPriority(tid, nice);
    return true;
  } catch {
    return false;
  }
}
