// Test harness, run inside a mount namespace by full-disk.test.ts: `node --import tsx full-disk-engine.ts
// <dir>`, <dir> a small tmpfs holding a copy of a database in <dir>/pgdata. Opens the embedded database
// through the Db interface, brings its WAL to a few hundred kB before the end of its segment, fills the
// filesystem, and writes: the next WAL segment cannot be created, which is what wedged PGlite for good.
// Then it looks at what statements do (answered, refused, or no answer within STATEMENT_MS), at the
// process's CPU time while it waits, and at whether the database takes writes again once the filler is
// deleted. It prints one JSON line (Outcome) and exits; it never hangs on the database itself.
import { open, readdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { openDatabase, type Db } from '../../src/platform/db/database.js';

/** A statement with no answer after this is counted as hung (a refusal takes a few ms). */
const STATEMENT_MS = 5000;
/** The CPU time is measured over this wait. */
const IDLE_WINDOW_MS = 2000;
/** Longest wait for the database to take writes again after the filler is deleted. */
const RECOVERY_MS = 30_000;
const WAL_SEGMENT = 16 * 1024 * 1024;

export interface Outcome {
  /** The first write that failed: its code and message. */
  firstError: { code?: string; message: string } | null;
  /** What each later statement did while the disk was full. */
  whileFull: string[];
  /** The disk's state the Db reported while full (absent on a Db without disk()). */
  disk: unknown;
  /** CPU time (ms) of this process, every thread, during IDLE_WINDOW_MS of waiting while full. */
  idleCpuMs: number;
  /** ms from deleting the filler to the first write that committed; null: none within RECOVERY_MS. */
  recoveredMs: number | null;
  /** Rows committed before the disk filled, and how many of them were read back after. */
  committed: number;
  found: number | null;
  /** ms close() took; null: it did not finish within STATEMENT_MS. */
  closeMs: number | null;
}

type Settled<T> = { ok: true; value: T } | { ok: false; error: Error } | { ok: 'hung' };

async function within<T>(p: Promise<T>, ms = STATEMENT_MS): Promise<Settled<T>> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<{ ok: 'hung' }>((r) => (timer = setTimeout(() => r({ ok: 'hung' }), ms)));
  const settled = p.then(
    (value) => ({ ok: true as const, value }),
    (error: Error) => ({ ok: false as const, error }),
  );
  try {
    return await Promise.race([settled, hung]);
  } finally {
    clearTimeout(timer);
  }
}

const describe = (s: Settled<unknown>) =>
  s.ok === 'hung' ? 'hung' : s.ok ? 'answered' : `refused ${(s.error as { code?: string }).code ?? ''}: ${s.error.message}`;

/** Writes zeros until the filesystem says ENOSPC: 1 MiB at a time, then 4 KiB at a time. */
async function fill(path: string): Promise<void> {
  const f = await open(path, 'w');
  try {
    for (const size of [1024 * 1024, 4096, 512]) {
      const chunk = Buffer.alloc(size);
      for (;;) {
        try {
          await f.write(chunk);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break;
          throw err;
        }
      }
    }
  } finally {
    await f.close().catch(() => undefined);
  }
}

async function run(dir: string): Promise<Outcome> {
  // DISK_MIN_FREE_MB 0: only the failed write stops the database (the threshold is the serve test's).
  const db: Db = await openDatabase({ dataDir: dir, poolMax: 1, timeoutMs: STATEMENT_MS, diskMinFreeMb: 0 });
  await db.exec('create table full_disk (id serial primary key, v text)');
  await db.query("insert into full_disk (v) select 'before' from generate_series(1, 100)");
  const committed = 100;
  // pg_logical_emit_message writes a WAL record of any size and nothing else: the quickest way to the end
  // of the segment without growing a table.
  // A checkpoint (the template's last close) may have made the next segment in advance: go past any such.
  const where = async () =>
    (
      await db.query<{ o: string; f: string }>(
        "select ((pg_current_wal_lsn() - '0/0'::pg_lsn) % $1)::text as o, pg_walfile_name(pg_current_wal_lsn()) as f",
        [WAL_SEGMENT],
      )
    )[0];
  const madeAhead = async (current: string) =>
    (await readdir(join(dir, 'pgdata', 'pg_wal'))).some((n) => /^[0-9A-F]{24}$/.test(n) && n > current);
  for (;;) {
    const w = await where();
    if (Number(w.o) >= WAL_SEGMENT - 300_000 && !(await madeAhead(w.f))) break;
    await db.query("select pg_logical_emit_message(false, 'pingd', repeat('x', 100000))");
  }
  const filler = join(dir, 'filler');
  await fill(filler);
  let firstError: Outcome['firstError'] = null;
  for (let i = 0; i < 2000 && !firstError; i++) {
    const s = await within(db.query('update full_disk set v = repeat(md5(random()::text), 8) where id = $1', [1 + (i % 100)]));
    if (s.ok === 'hung') firstError = { message: 'hung' };
    else if (!s.ok) firstError = { code: (s.error as { code?: string }).code, message: s.error.message };
  }
  const whileFull: string[] = [];
  for (let i = 0; i < 3; i++) {
    whileFull.push(describe(await within(db.query('select count(*) from full_disk'))));
    whileFull.push(describe(await within(db.query("insert into full_disk (v) values ('while full')"))));
  }
  const disk = db.disk?.();
  const cpu0 = process.cpuUsage();
  await new Promise((r) => setTimeout(r, IDLE_WINDOW_MS));
  const cpu = process.cpuUsage(cpu0);
  const idleCpuMs = Math.round((cpu.user + cpu.system) / 1000);

  await unlink(filler);
  const freedAt = performance.now();
  let recoveredMs: number | null = null;
  while (performance.now() - freedAt < RECOVERY_MS) {
    const s = await within(db.query("insert into full_disk (v) values ('after')"), 1000);
    if (s.ok === true) {
      recoveredMs = Math.round(performance.now() - freedAt);
      break;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  let found: number | null = null;
  if (recoveredMs !== null) {
    const s = await within(db.query<{ n: number }>("select count(*)::int as n from full_disk where v = 'before'"));
    if (s.ok === true) found = s.value[0].n;
  }
  const t = performance.now();
  const closed = await within(db.close());
  const closeMs = closed.ok === true ? Math.round(performance.now() - t) : null;
  return { firstError, whileFull, disk, idleCpuMs, recoveredMs, committed, found, closeMs };
}

const dir = process.argv[2];
if (!dir) {
  process.stderr.write('usage: full-disk-engine <directory on a small filesystem, with pgdata in it>\n');
  process.exit(2);
}
run(dir).then(
  (o) => {
    process.stdout.write(`${JSON.stringify(o)}\n`);
    // The engine's thread may still spin (on code without the disk guard): exit rather than wait for it.
    process.exit(0);
  },
  (err: Error) => {
    process.stderr.write(`${err.stack ?? err.message}\n`);
    process.exit(1);
  },
);
