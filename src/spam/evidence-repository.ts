// Owns gathering the WeblogEvidence of verdict.ts from pingd's tables, for a set of weblogs at once (the
// rescoring job's batch), the way bench/spam/evidence.ts derives it on the corpus: ping times from `pings`,
// siblings by weblog_spam.site, the sites pinged from the weblog's last client address, settled
// verification outcomes, items verification found (`feed_items`), and whether the weblog's current feed
// names pingd as its hub or cloud (`feeds.names_pingd`). A fixed number of statements per
// batch, whatever its size. "The last hour" is the hour before the weblog's own latest ping, as on the
// corpus: a rescore right after a ping sees the hour before now.
import type { Queryable } from '../platform/db/database.js';
import { withContext } from '../platform/errors.js';
import type { Outcome } from '../platform/outcomes.js';
import { itemSite, siteOf } from './domains.js';
import { RHYTHM_PINGS, SIBLINGS_CAP } from './rhythm.js';
import { CONTENT_VERIFICATIONS } from './content.js';
import type { WeblogEvidence } from './verdict.js';

const HOUR_MS = 3_600_000;
/** A weblog's recent items: the newest this many verification found (a feed carries its newest ten or so). */
export const RECENT_ITEMS = 10;
/**
 * Pings read per batch from the batch's addresses: rhythm.address_burst's weights change at 20 and 100
 * domains, which an address's 5,000 latest pings show if it pinged for that many. An address that pinged
 * more within the hour is counted by its latest 5,000 (a lower bound for windows that end earlier).
 */
export const ADDRESS_PINGS_CAP = 5_000;
/**
 * Weblogs per siblings statement. A weblog costs up to 2 × SIBLINGS_WALK look-ups of a sibling's row (and
 * a probe of its pings each): 50 weblogs a statement held the embedded database's one session for 0.5-0.65 s
 * in the wrk bench (new weblogs of one domain, ~7,000 pings/s), intake's pings waiting behind it (p99 452 ms
 * in that run); 10 a statement lets intake's statements in between.
 */
export const SIBLINGS_STATEMENT_WEBLOGS = 10;
/**
 * Siblings examined on each side of a weblog (SIBLINGS): twice the cap, so a farm's weblog reaches the cap
 * through siblings that do not count (first pinged after it, or quiet for the hour) among its nearest.
 */
export const SIBLINGS_WALK = 2 * SIBLINGS_CAP;

/** One weblog's evidence, with what the job needs to write its score. */
export interface GatheredWeblog {
  weblogId: number;
  /** siteOf(url): written to weblog_spam.site when a row scored before migration 025 has none. */
  site: string | null;
  evidence: WeblogEvidence;
}

interface BaseRow {
  id: number;
  url: string;
  name: string | null;
  site: string | null;
  times: number[] | null;
  addr: string | null;
  vs: { o: Outcome; n: number }[] | string | null;
  new_items: number;
  recent: { t: string | null; l: string | null }[] | string | null;
  publisher: boolean;
  names_pingd: boolean;
}

const json = <T>(v: T | string | null): T | null => (typeof v === 'string' ? (JSON.parse(v) as T) : v);

// Per weblog (scored, i.e. with a weblog_spam row): its last RHYTHM_PINGS ping times and its last ping's
// client address (pings_weblog_id), its last CONTENT_VERIFICATIONS settled outcomes with their new items
// (ping_verifications_weblog_settled), how many items verification found new and the newest RECENT_ITEMS of
// them (feed_items_weblog_id), whether a publisher registered its URL for RSS Ping, and whether its current
// feed (weblogs.feed_id: the one its latest verification read) named pingd as its hub or cloud when last
// read as a feed (one probe of the feeds primary key).
const BASE = `
select w.id, w.url, w.name, s.site,
  (select array_agg(x.ms order by x.id) from (
     select p.id, floor(extract(epoch from p.received_at) * 1000)::float8 as ms from pings p
      where p.weblog_id = w.id order by p.id desc limit ${RHYTHM_PINGS}) x) as times,
  (select p.client_addr from pings p where p.weblog_id = w.id order by p.id desc limit 1) as addr,
  (select jsonb_agg(jsonb_build_object('o', v.outcome, 'n', v.n) order by v.ping_id desc) from (
     select v.ping_id, v.outcome,
            case when v.outcome = 'verified' then coalesce(jsonb_array_length(v.new_items), 0) else 0 end as n
       from ping_verifications v where v.weblog_id = w.id and v.outcome is not null
      order by v.ping_id desc limit ${CONTENT_VERIFICATIONS}) v) as vs,
  (select count(*) from feed_items fi where fi.weblog_id = w.id)::int as new_items,
  (select jsonb_agg(jsonb_build_object('t', r.title, 'l', r.link) order by r.id desc) from (
     select fi.id, fi.title, fi.link from feed_items fi where fi.weblog_id = w.id order by fi.id desc limit ${RECENT_ITEMS}) r) as recent,
  exists (select 1 from rssping_publishers rp where rp.site_url = w.url) as publisher,
  coalesce((select f.names_pingd from feeds f where f.id = w.feed_id), false) as names_pingd
from weblogs w join weblog_spam s on s.weblog_id = w.id
where w.id = any($1::bigint[])`;

// Other scored weblogs of the same site with a ping in the hour before the weblog's last ping ($3, ms),
// counted up to $4 (SIBLINGS_CAP) among the $5 (SIBLINGS_WALK) created nearest before it and the $5
// nearest after it (weblog ids come in order of first ping; weblog_spam_site_weblog walks them). A farm's
// splogs are made in bursts, so its nearest siblings are the farm; a domain with more weblogs than that is
// counted from the nearest only, a lower bound. REGRESSION: walking every weblog of the site, a weblog of a
// domain with 60,000 weblogs pinged after it probed all 60,000 (none could count, so the cap never ended
// the walk): 9-11 s a statement of 50 weblogs on the embedded database, no ping answered meanwhile (the wrk
// bench's new weblogs, all of one domain). A sibling first pinged after the weblog's last ping cannot count
// and is passed over without a probe.
// A sibling whose last ping falls in that hour needs no probe. Otherwise the probe walks the sibling's
// own pings newest first (pings_weblog_id) to the first at or before the weblog's last ping: written as
// EXISTS with both bounds, the embedded database (no autovacuum, default selectivities) planned it as a
// bitmap AND with the hour's whole received_at range, 33 ms a probe once the hour held ~1M pings: 20
// weblogs took 70 s. (Ids and times agree but for a commit batch's milliseconds.) Each sibling's weblog row
// is looked up by its key (LATERAL … LIMIT 1 is never turned into a join): as a join it was planned as a
// hash of every weblog pinged in the hour, once per weblog of the batch (0.6–18 s a batch).
const SIBLINGS = `
select b.id, (select count(*) from (
  select 1 from (
    (select s2.weblog_id from weblog_spam s2 where s2.site = b.site and s2.weblog_id < b.id order by s2.weblog_id desc limit $5::int)
    union all
    (select s2.weblog_id from weblog_spam s2 where s2.site = b.site and s2.weblog_id > b.id order by s2.weblog_id limit $5::int)
  ) s2
  cross join lateral (select w.first_ping_at, w.last_ping_at from weblogs w where w.id = s2.weblog_id limit 1) w2
  where w2.first_ping_at <= to_timestamp((b.t_ms + 1) / 1000.0)
    and w2.last_ping_at > to_timestamp(b.t_ms / 1000.0) - interval '1 hour'
    and (w2.last_ping_at <= to_timestamp((b.t_ms + 1) / 1000.0)
      or (select p.received_at from pings p
           where p.weblog_id = s2.weblog_id and p.received_at <= to_timestamp((b.t_ms + 1) / 1000.0)
           order by p.id desc limit 1) > to_timestamp(b.t_ms / 1000.0) - interval '1 hour')
  limit $4::int) n)::int as n
from unnest($1::bigint[], $2::text[], $3::float8[]) as b(id, site, t_ms)`;

// The most recent pings (at most $4, ADDRESS_PINGS_CAP) from the batch's addresses over the span its
// weblogs' hours cover (pings_received_at, read newest first), with the site of its weblog: counted per
// weblog in the process. An address that pinged for 500,000 weblogs within the hour sent them all to the
// process before.
const ADDRESS_PINGS = `
select p.client_addr as addr, floor(extract(epoch from p.received_at) * 1000)::float8 as ms, s.site
from pings p join weblog_spam s on s.weblog_id = p.weblog_id
where p.received_at > to_timestamp($2::float8 / 1000.0) - interval '1 hour'
  and p.received_at <= to_timestamp(($3::float8 + 1) / 1000.0)
  and p.client_addr = any($1::text[])
order by p.received_at desc
limit $4::int`;

// Per recent item that links off its weblog's site (k): the other weblogs, of another site, that carry an
// item of the same title or the same link (feed_items_title, feed_items_link).
const DUPLICATES = `
with x as (select * from unnest($1::int[], $2::bigint[], $3::text[], $4::text[], $5::text[]) as x(k, id, own, title, link)),
c as (
  select x.k, fi.weblog_id from x join feed_items fi on fi.title = x.title where x.title <> ''
  union
  select x.k, fi.weblog_id from x join feed_items fi on fi.link = x.link where x.link <> ''
)
select x.id, x.k, count(distinct c.weblog_id)::int as n
from x join c on c.k = x.k join weblog_spam s on s.weblog_id = c.weblog_id
where c.weblog_id <> x.id and s.site is distinct from x.own
group by x.id, x.k`;

/**
 * The evidence of each scored weblog of `weblogIds` (a weblog without a weblog_spam row, pinged under
 * SPAM_FILTER=off, is left out).
 */
export async function gatherEvidence(q: Queryable, weblogIds: number[]): Promise<GatheredWeblog[]> {
  if (weblogIds.length === 0) return [];
  return withContext(`gathering the spam evidence of ${weblogIds.length} weblogs`, async () => {
    const base = await q.query<BaseRow>(BASE, [weblogIds]);
    const out: (GatheredWeblog & { lastMs: number | null; addr: string | null; recent: { t: string | null; l: string | null }[] })[] = [];
    for (const r of base) {
      const times = (r.times ?? []).map(Number);
      const site = r.site ?? siteOf(r.url);
      const evidence: WeblogEvidence = {
        url: r.url,
        name: r.name,
        pingTimesMs: times,
        siblingsLastHour: 0,
        domainsFromAddressLastHour: 0,
        verifications: (json(r.vs) ?? []).map((v) => ({ outcome: v.o, newItems: Number(v.n) })),
        duplicateItemWeblogs: 0,
        oneTargetLinkShare: 0,
        verifiedNewItems: Number(r.new_items),
        registeredPublisher: Boolean(r.publisher),
        namesPingd: Boolean(r.names_pingd),
      };
      out.push({
        weblogId: Number(r.id),
        site,
        evidence,
        lastMs: times.length ? times[times.length - 1] : null,
        addr: r.addr,
        recent: json(r.recent) ?? [],
      });
    }
    const byId = new Map(out.map((g) => [g.weblogId, g]));
    const timed = out.filter((g) => g.lastMs !== null);

    const withSite = timed.filter((g) => g.site !== null);
    for (let i = 0; i < withSite.length; i += SIBLINGS_STATEMENT_WEBLOGS) {
      const part = withSite.slice(i, i + SIBLINGS_STATEMENT_WEBLOGS);
      const rows = await q.query<{ id: number; n: number }>(SIBLINGS, [
        part.map((g) => g.weblogId),
        part.map((g) => g.site),
        part.map((g) => g.lastMs),
        SIBLINGS_CAP,
        SIBLINGS_WALK,
      ]);
      for (const r of rows) byId.get(Number(r.id))!.evidence.siblingsLastHour = Number(r.n);
    }

    const withAddr = timed.filter((g) => g.addr !== null);
    if (withAddr.length) {
      const lasts = withAddr.map((g) => g.lastMs!);
      const rows = await q.query<{ addr: string; ms: number; site: string | null }>(ADDRESS_PINGS, [
        [...new Set(withAddr.map((g) => g.addr!))],
        Math.min(...lasts),
        Math.max(...lasts),
        ADDRESS_PINGS_CAP,
      ]);
      const byAddr = new Map<string, { ms: number; site: string | null }[]>();
      for (const r of rows) {
        const xs = byAddr.get(r.addr) ?? [];
        xs.push({ ms: Number(r.ms), site: r.site });
        byAddr.set(r.addr, xs);
      }
      for (const g of withAddr) {
        const sites = new Set<string>();
        const last = g.lastMs!;
        for (const p of byAddr.get(g.addr!) ?? []) if (p.ms > last - HOUR_MS && p.ms <= last && p.site !== null) sites.add(p.site);
        g.evidence.domainsFromAddressLastHour = sites.size;
      }
    }

    // Links: the share of one other site (a link through a feed proxy is the weblog's own: itemSite), and
    // the items that leave the weblog's site, whose copies elsewhere count.
    const dk: number[] = [];
    const did: number[] = [];
    const down: (string | null)[] = [];
    const dtitle: string[] = [];
    const dlink: string[] = [];
    for (const g of out) {
      const targets = new Map<string, number>();
      for (const it of g.recent) {
        const s = it.l ? itemSite(it.l, g.site) : null;
        if (s !== null && s !== g.site) targets.set(s, (targets.get(s) ?? 0) + 1);
        if (s === null || s === g.site) continue;
        dk.push(dk.length);
        did.push(g.weblogId);
        down.push(g.site);
        dtitle.push(it.t ?? '');
        dlink.push(it.l ?? '');
      }
      g.evidence.oneTargetLinkShare = g.recent.length ? Math.max(0, ...targets.values()) / g.recent.length : 0;
    }
    if (dk.length) {
      const rows = await q.query<{ id: number; n: number }>(DUPLICATES, [dk, did, down, dtitle, dlink]);
      for (const r of rows) {
        const e = byId.get(Number(r.id))!.evidence;
        e.duplicateItemWeblogs = Math.max(e.duplicateItemWeblogs, Number(r.n));
      }
    }
    return out.map(({ weblogId, site, evidence }) => ({ weblogId, site, evidence }));
  });
}
