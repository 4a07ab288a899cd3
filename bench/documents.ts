// Owns the polling scenarios of `npm run bench` (`short-200-gzip`, `short-304`, `short-226`): GET
// /shortChanges.xml from pingd on PostgreSQL (BENCH_SHORT_WEBLOGS weblogs) against the baseline sending the
// same bytes.
import { startPingd, createPostgresDatabase, type Child } from './lib/servers.js';
import { runLoad, type LoadSpec } from './lib/load.js';
import { pingSpec, documentSpec, sample } from './lib/scenarios.js';
import type { Row } from './lib/report.js';
import { OPTS, pingdEnv, wanted, log } from './lib/options.js';
import { measure, profileArgs, reportProfile } from './lib/measure.js';

/** Pings `n` distinct weblogs through XML-RPC (64 at a time). */
async function seedPings(url: string, n: number): Promise<void> {
  await runLoad(url, pingSpec(), { connections: Math.min(64, n), amount: n });
}

/** Waits until `path` is rendered with a validator different from `not`; returns its ETag (gzip). */
async function waitRendered(url: string, path: string, not: string | undefined, timeoutMs = 60_000): Promise<string> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const s = await sample(url, documentSpec(path, { 'accept-encoding': 'gzip' }, 200));
    const etag = s.headers.etag;
    if (s.status === 200 && etag && etag !== not) return etag;
    if (Date.now() > until) throw new Error(`${path} was not (re)rendered within ${timeoutMs} ms (last status ${s.status})`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

export async function documents(baseline: Child): Promise<{ rows: Row[]; profile: string }> {
  const ids = ['short-200-gzip', 'short-304', 'short-226'].filter(wanted);
  if (!ids.length) return { rows: [], profile: '' };
  const db = await createPostgresDatabase(OPTS.databaseUrl);
  const prof = profileArgs('documents');
  let pingd: Child | undefined;
  try {
    // Renders every 2 s (instead of 10) only so that seeding is quick; serving is what is measured here.
    pingd = await startPingd({ env: pingdEnv({ ...db.env, RENDER_CRON: '*/2 * * * * *' }), nodeArgs: prof.args });
    const path = '/shortChanges.xml';
    await seedPings(pingd.url, OPTS.shortWeblogs);
    // The first rendering may predate the seed: wait for one that has it all.
    let base = await waitRendered(pingd.url, path, undefined);
    await new Promise((r) => setTimeout(r, 2500));
    base = await waitRendered(pingd.url, path, undefined);
    // A few more pings make the next rendering, so that `base` is a delta base for it.
    await seedPings(pingd.url, 50);
    const current = await waitRendered(pingd.url, path, base);
    const full = await sample(pingd.url, documentSpec(path, { 'accept-encoding': 'gzip' }, 200));
    log(`shortChanges.xml: ${OPTS.shortWeblogs + 50} weblogs, ${full.body.length} bytes gzip, etag ${current}`);
    const rows: Row[] = [];
    const cases: Record<string, { spec: LoadSpec; target?: number; label: string }> = {
      'short-200-gzip': {
        spec: documentSpec(path, { 'accept-encoding': 'gzip' }, 200),
        target: 0.6,
        label: `GET ${path} 200 gzip (${Math.round(full.body.length / 1024)} KB)`,
      },
      'short-304': {
        spec: documentSpec(path, { 'accept-encoding': 'gzip', 'if-none-match': current }, 304),
        target: 0.85,
        label: `GET ${path} 304`,
      },
      'short-226': {
        spec: documentSpec(path, { 'accept-encoding': 'gzip', 'a-im': 'feed', 'if-none-match': base }, 226),
        label: `GET ${path} 226 delta (50 new)`,
      },
    };
    await pingd.stop();
    pingd = undefined;
    // The same requests from pingd as deployed (renderer on its default schedule, verification on) and with
    // both stopped, each a fresh process on the seeded database: the documents are already rendered, and
    // nothing new is pinged, so both serve the same bytes and validators.
    const configs: { label: string; env: Record<string, string> }[] = [
      { label: 'postgres, as deployed', env: { VERIFY_PINGS: 'mark' } },
      { label: 'postgres, renderer and verification stopped', env: { RENDER_SCHEDULER: 'false' } },
    ];
    for (const config of configs) {
      pingd = await startPingd({ env: pingdEnv({ ...db.env, ...config.env }), nodeArgs: prof.args });
      for (const id of ids) {
        const c = cases[id];
        const probe = await sample(pingd.url, c.spec);
        if (!c.spec.okStatus?.includes(probe.status))
          log(`  warning: ${id} (${config.label}) answered ${probe.status}, expected ${c.spec.okStatus?.join('/')}`);
        const m = await measure(id, config.label, c.spec, pingd, baseline, db, false);
        m.row.scenario = `${id} (${probe.body.length < 1024 ? `${probe.body.length} B` : `${Math.round(probe.body.length / 1024)} KB`})`;
        if (c.target !== undefined) {
          m.row.target = `≥ ${c.target * 100}%`;
          m.row.pass = m.row.ratio >= c.target;
        }
        rows.push(m.row);
      }
      await pingd.stop();
      pingd = undefined;
    }
    return { rows, profile: reportProfile(prof.dir) };
  } finally {
    if (pingd) await pingd.stop();
    await db.drop();
  }
}
