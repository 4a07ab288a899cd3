// Owns the start of every budgeted task on its thread (budget-pool.ts): it says which thread runs the task
// and how much CPU that thread had used, in the task's shared clock, then runs the caller's task module
// (its default export, named in workerData). The main thread reads the clock to count the task's CPU time.
import { workerData } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';
import { ownThreadId, threadCpuMs } from './thread-cpu.js';

type TaskModule = { default: (task: unknown) => unknown };
const task: Promise<TaskModule> = import(pathToFileURL((workerData as { taskModule: string }).taskModule).href);
const tid = ownThreadId();

/** clock: [thread id, its CPU ms when the task started] (0s where it cannot be read). */
export default async function run(job: { task: unknown; clock: Int32Array }): Promise<unknown> {
  const mod = await task;
  Atomics.store(job.clock, 1, threadCpuMs(tid) ?? 0);
  Atomics.store(job.clock, 0, tid);
  return mod.default(job.task);
}
