// Owns the intake scenarios of `npm run bench` (`ping`, `extendedPing`, `pingSiteForm`, `ping-hosts`,
// `ping+render`): pingd taking pings on a fresh database of each backend against the baseline's fixed reply,
// then the check that every acknowledged ping is a stored row.
import { startPingd, createPostgresDatabase, createPgliteDatabase, type Child } from './lib/servers.js';
import { runLoad, type LoadSpec } from './lib/load.js';
import { pingSpec, extendedPingSpec, pingSiteFormSpec, pingOnHostsSpec } from './lib/scenarios.js';
import type { SpreadHosts } from './lib/feed-hosts.js';
import type { Row } from './lib/report.js';
import { OPTS, pingdEnv, wanted, log } from './lib/options.js';
import { measure, profileArgs, reportProfile } from './lib/measure.js';

interface IntakeScenario {
  id: string;
  label: string;
  spec: () => LoadSpec;
  target?: Partial<Record<'postgres' | 'pglite', { ratio: number; p99?: number }>>;
}

export const INTAKE: IntakeScenario[] = [
  {
    id: 'ping',
    label: 'XML-RPC weblogUpdates.ping, distinct URLs',
    spec: pingSpec,
    target: { postgres: { ratio: 0.25, p99: 50 }, pglite: { ratio: 0.1 } },
  },
  { id: 'extendedPing', label: 'XML-RPC extendedPing (WordPress bytes), distinct URLs', spec: extendedPingSpec },
  { id: 'pingSiteForm', label: 'GET /pingSiteForm, distinct URLs', spec: pingSiteFormSpec },
];

/**
 * Intake is measured twice per backend. As deployed: the renderer on its default schedule and verification
 * on (VERIFY_PINGS=mark), the pinged weblogs on loopback weblog hosts so that every verification stays on
 * this machine (FETCH_ALLOW_PRIVATE=true lets it reach them; nothing else differs from the defaults). With
 * parts stopped (RENDER_SCHEDULER=false, VERIFY_PINGS=off): intake alone, the figure the targets are stated
 * for. The renderer's share grows with the hour's pings, and a benchmark minute holds far more than a
 * real hour (~200 pings/s at Spinn3r's peak, the bench sends thousands a second): the `ping+render` row
 * measures intake while the renderer re-renders an hour of BENCH_HOUR_WEBLOGS weblogs on its schedule.
 */
function intakeGroups(feedHosts: SpreadHosts | undefined): IntakeGroup[] {
  const groups: IntakeGroup[] = [];
  for (const backend of OPTS.backends) {
    // The embedded database's target is about pings; its other rows only when named (they cost a minute).
    const scenarios = backend === 'pglite' ? INTAKE.filter((s) => s.id === 'ping' || OPTS.scenarios?.includes(s.id)) : INTAKE;
    if (feedHosts && scenarios.some((x) => x.id === 'ping')) {
      const spec = () => pingOnHostsSpec(feedHosts.origin);
      groups.push({
        backend,
        label: `${backend}, as deployed`,
        scenarios: [{ id: 'ping', label: 'XML-RPC weblogUpdates.ping, distinct weblogs on 64,000 loopback hosts', spec }],
        env: { VERIFY_PINGS: 'mark', FETCH_ALLOW_PRIVATE: 'true' },
      });
    }
    groups.push({ backend, label: `${backend}, renderer and verification stopped`, scenarios, env: { RENDER_SCHEDULER: 'false' } });
  }
  // Intake with verification on (VERIFY_PINGS=mark, the default) against the same with it off: pings of
  // distinct weblogs on loopback weblog hosts, each verified (homepage, autodiscovery, feed) while the load runs.
  if (wanted('ping-hosts') && feedHosts) {
    const spec = () => pingOnHostsSpec(feedHosts!.origin);
    for (const backend of OPTS.backends) {
      for (const verify of ['off', 'mark']) {
        groups.push({
          backend,
          label: `${backend}, VERIFY_PINGS=${verify}`,
          scenarios: [{ id: 'ping-hosts', label: 'weblogUpdates.ping, distinct weblogs on 64,000 loopback hosts', spec }],
          env: { RENDER_SCHEDULER: 'false', VERIFY_PINGS: verify, FETCH_ALLOW_PRIVATE: 'true' },
        });
      }
    }
  }
  // Intake with spam scoring off against the default (mark: the URL family scored for each new weblog, as
  // under hold) on distinct URLs: what the scoring costs a ping (issue 39, item 4). Renderer and
  // verification stopped so that the difference is the scoring's.
  if (wanted('ping-spam')) {
    for (const backend of OPTS.backends) {
      for (const filter of ['off', 'mark']) {
        groups.push({
          backend,
          label: `${backend}, SPAM_FILTER=${filter}`,
          scenarios: [{ id: 'ping-spam', label: 'weblogUpdates.ping, distinct URLs (new weblogs: each scored)', spec: pingSpec }],
          env: { RENDER_SCHEDULER: 'false', SPAM_FILTER: filter },
        });
      }
    }
  }
  if (OPTS.backends.includes('postgres')) {
    groups.push({
      backend: 'postgres',
      label: `postgres, rendering ${Math.round(OPTS.hourWeblogs / 1000)}k weblogs/h`,
      scenarios: [{ id: 'ping+render', label: 'weblogUpdates.ping while rendering', spec: pingSpec }],
      env: {},
      seed: OPTS.hourWeblogs,
    });
  }
  return groups;
}

interface IntakeResult {
  rows: Row[];
  check: string;
  ok: boolean;
  profile: string;
}

interface IntakeGroup {
  backend: 'postgres' | 'pglite';
  /** Shown in the backend column. */
  label: string;
  scenarios: IntakeScenario[];
  env: Record<string, string>;
  /** Distinct weblogs pinged before measuring (so that the renderer has a realistic hour to render). */
  seed?: number;
}

/**
 * Intake on a fresh database: the scenarios in turn on one pingd, then a graceful stop (which drains the
 * queue) and the check that every acknowledged ping is a stored row. A refusal for a database that answered
 * too late may still have committed, so rows may exceed acknowledgements by those, never fall short.
 */
async function intake(group: IntakeGroup, baseline: Child): Promise<IntakeResult | undefined> {
  const { backend, label } = group;
  const scenarios = group.scenarios.filter((s) => wanted(s.id));
  if (!scenarios.length) return undefined;
  const db = backend === 'postgres' ? await createPostgresDatabase(OPTS.databaseUrl) : await createPgliteDatabase();
  const prof = profileArgs(label.replace(/\W+/g, '-'));
  let pingd: Child | undefined;
  try {
    pingd = await startPingd({ env: pingdEnv({ ...group.env, ...db.env }), nodeArgs: prof.args });
    log(`pingd on ${label} at ${pingd.url}`);
    let acks = 0;
    let unsure = 0;
    if (group.seed) {
      const r = await runLoad(pingd.url, pingSpec(), { connections: OPTS.connections, amount: group.seed });
      acks += r.acks;
      unsure += r.unsure;
      log(`  seeded ${r.acks} weblogs`);
    }
    const rows: Row[] = [];
    for (const sc of scenarios) {
      const m = await measure(sc.id, label, sc.spec(), pingd, baseline, db, true);
      const target = sc.target?.[backend];
      if (target) {
        m.row.target = `≥ ${target.ratio * 100}%${target.p99 ? `, p99 ≤ ${target.p99} ms` : ''}`;
        m.row.pass = m.row.ratio >= target.ratio && (target.p99 === undefined || m.row.p99 <= target.p99);
      }
      rows.push(m.row);
      acks += m.acks;
      unsure += m.unsure;
    }
    const code = await pingd.stop();
    pingd = undefined;
    if (code !== 0) log(`pingd on ${label} exited with ${code}`);
    const stored = await db.countPings();
    const ok = stored >= acks && stored <= acks + unsure;
    const check = `${label}: ${acks} pings acknowledged, ${stored} rows stored${unsure ? ` (${unsure} refused as the database answered too late)` : ''} ${ok ? '✅' : stored < acks ? '❌ ACKNOWLEDGED PINGS MISSING' : '❌ MISMATCH'}`;
    return { rows, check, ok, profile: reportProfile(prof.dir) };
  } finally {
    if (pingd) await pingd.stop();
    await db.drop();
  }
}

/** Every intake group in turn; `feedHosts` serve the weblogs the `ping-hosts` rows ping. */
export async function runIntake(
  baseline: Child,
  feedHosts: SpreadHosts | undefined,
): Promise<{ rows: Row[]; checks: string[]; profiles: string[]; ok: boolean }> {
  const out = { rows: [] as Row[], checks: [] as string[], profiles: [] as string[], ok: true };
  for (const group of intakeGroups(feedHosts)) {
    const r = await intake(group, baseline);
    if (!r) continue;
    out.rows.push(...r.rows);
    out.ok &&= r.ok;
    out.checks.push(r.check);
    if (r.profile) out.profiles.push(r.profile);
  }
  return out;
}
