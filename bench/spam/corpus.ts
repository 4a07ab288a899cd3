// Owns the synthetic labelled splog corpus (issue 39, item 3): weblogs, their pings, client addresses and
// feeds over a window of hours, generated from a committed seed. No public splog data set is available here
// (TREC Blogs06 is licensed), so the shapes are the published descriptions': splogs were ~75% of the pings
// a ping server got (Kolari et al., TREC 2006), their hosts keyword phrases glued or hyphenated on .info-heavy
// TLDs, subdomain farms of one domain, pinging on timers (Lin et al. 2008: regular, self-similar posting),
// scraped items shared across many hosts, link farms pointing at one money site, and "splogs" with no feed.
// Honest weblogs are varied and sloppy on purpose: commercial words in honest names, platforms pinging for
// thousands of blogs from few addresses, cron pingers, broken feeds, FeedBurner links, cross-posting,
// WordPress's default "Hello world!". Pure: the same seed gives the same corpus, byte for byte.
import { createHash } from 'node:crypto';

/** The committed seed: every figure in bench/results/spam.md and docs/design/spam.md comes from it. */
export const CORPUS_SEED = 20060039;

export type Label = 'spam' | 'honest';
export const SPAM_KINDS = ['keyword-host', 'subdomain-farm', 'scraper', 'link-farm', 'no-feed'] as const;
export const HONEST_KINDS = ['personal', 'platform-hosted', 'news', 'sloppy-frequent', 'broken-feed', 'new-blog'] as const;
export type Kind = (typeof SPAM_KINDS)[number] | (typeof HONEST_KINDS)[number];
export type Split = 'tune' | 'heldout';

export interface CorpusItem {
  title: string;
  link: string;
  /** When it appeared in the feed (ms since the epoch). */
  atMs: number;
}

export interface CorpusPing {
  atMs: number;
  /** The client address the ping came from. */
  address: string;
}

/** A stretch of time when fetching the feed does not give a feed. */
export interface Outage {
  fromMs: number;
  toMs: number;
  outcome: 'not_a_feed' | 'unreachable' | 'gone';
}

export interface CorpusWeblog {
  index: number;
  url: string;
  name: string;
  label: Label;
  kind: Kind;
  split: Split;
  /** Oldest first. */
  pings: CorpusPing[];
  /** Everything its feed ever carries, oldest first (some before the window: the back catalogue). */
  items: CorpusItem[];
  /** The feed is HTML throughout (no-feed splogs). */
  noFeed: boolean;
  outages: Outage[];
  registeredPublisher: boolean;
  namesPingd: boolean;
}

export interface Corpus {
  seed: number;
  startMs: number;
  endMs: number;
  weblogs: CorpusWeblog[];
  /**
   * Distinct registrable domains an address pings for per hour beyond the corpus: a blog platform's few
   * ping addresses carry thousands of blogs the corpus does not hold (WordPress.com pings for all of its
   * blogs from a handful of addresses), so a sample of 3,000 weblogs alone would understate them.
   */
  backgroundDomainsPerHour: Record<string, number>;
}

export interface CorpusOptions {
  seed?: number;
  weblogs?: number;
  /** Share of spam among weblogs (Kolari et al.: ~75% of pings; here ~72% of weblogs, more of the pings). */
  spamShare?: number;
  hours?: number;
  /** Share of weblogs held out from tuning, chosen by a hash of the index. */
  heldOutShare?: number;
}

const MIN = 60_000;
const HOUR = 60 * MIN;
/** The window's start: fixed, so that the corpus does not depend on when it is generated. */
const START_MS = Date.UTC(2026, 10, 1, 0, 0, 0);

/** mulberry32: a small seeded PRNG, good enough for a corpus (not for anything secret). */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)];
  const chance = (p: number) => next() < p;
  /** An exponential gap of the given mean: Poisson arrivals, how people publish. */
  const expo = (mean: number) => -Math.log(1 - next()) * mean;
  /** A value from weighted choices. */
  const weighted = <T>(xs: readonly (readonly [T, number])[]): T => {
    let r = next() * xs.reduce((s, x) => s + x[1], 0);
    for (const [v, w] of xs) if ((r -= w) < 0) return v;
    return xs[xs.length - 1][0];
  };
  return { next, int, pick, chance, expo, weighted };
}
type Rng = ReturnType<typeof prng>;

/** FNV-1a of the index: the held-out split stays the same whatever the seed or the corpus size. */
export function splitOf(index: number, heldOutShare = 0.3): Split {
  let h = 0x811c9dc5;
  for (const c of `weblog-${index}`) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
  return h % 1000 < heldOutShare * 1000 ? 'heldout' : 'tune';
}

// Honest vocabulary: people, places, hobbies, and a few honest names with a word splogs also use.
const FIRST =
  'anna ben carla dev elena farid greta hugo ines jonas kate liam maya nils olga pedro quinn rosa sam tomas uma victor wen yusuf zoe amir bea chloe dario emma felix hana ivan julia kenji lea marco nora oscar priya rafael sofia theo'.split(
    ' ',
  );
const LAST =
  'freeman okafor lindqvist moreau tanaka rossi novak schmidt garcia oconnor kowalski silva haddad nakamura fischer dubois kim berg costa walsh meyer patel olsen romero weber'.split(
    ' ',
  );
const HOBBY =
  'garden bread knitting birding climbing cycling ferments pottery chess woodwork sourdough tea vinyl hiking kayak bonsai quilting astronomy beekeeping running'.split(
    ' ',
  );
const TOPIC =
  'rust postgres typescript linux photography history poetry travel parenting cooking books design urbanism music film science gardening economics teaching'.split(
    ' ',
  );
const PLACE = 'lisbon oslo leeds porto kyoto lagos quito tallinn boston ghent hobart krakow utrecht valencia'.split(' ');
const ADJ = 'patient quiet wandering curious slow small rusty little hungry sunday'.split(' ');
const NOUN = 'gardener notebook kitchen lantern compass harbour orchard workshop margin attic'.split(' ');
/** Honest blogs whose names carry a commercial word: what keeps the URL family's precision honest. */
const COMMERCIAL_HONEST: ((r: Rng) => [host: string, name: string])[] = [
  (r) => {
    const p = r.pick(PLACE);
    return [`cheapeatsin${p}`, `Cheap Eats in ${cap(p)}`];
  },
  (r) => {
    const l = r.pick(LAST);
    return [`${l}photography`, `${cap(l)} Photography`];
  },
  (r) => {
    const f = r.pick(FIRST);
    return [`pokernightwith${f}`, `Poker Night with ${cap(f)}`];
  },
  (r) => {
    const f = r.pick(FIRST);
    return [`${f}-on-bitcoin`, `${cap(f)} on Bitcoin`];
  },
  () => ['fatcyclist', 'Fat Cyclist'],
  (r) => {
    const p = r.pick(PLACE);
    return [`${p}couponmom`, `${cap(p)} Coupon Mom`];
  },
  (r) => {
    const l = r.pick(LAST);
    return [`${l}mortgagenotes`, `${cap(l)}'s Mortgage Notes`];
  },
  (r) => {
    const t = r.pick(TOPIC);
    return [`free${t}notes`, `Free ${cap(t)} Notes`];
  },
  (r) => {
    const p = r.pick(PLACE);
    return [`${p}-deals-and-steals`, `Deals and Steals in ${cap(p)}`];
  },
];
const OPENERS =
  'Notes on|On|A week of|Why I still like|Learning|Back to|More|Against|In praise of|Fixing|Starting|Giving up on|Slow|Small wins in|Winter|Spring|The trouble with|Thinking about'.split(
    '|',
  );
const CLOSERS =
  `again|in the rain|with the kids|after the move|on a budget|the hard way|at last|for beginners|without a plan|revisited|at 5 a.m.|with old tools|before the holidays|in a small flat|after ten years|with friends|on the train|this summer|and what broke|and the neighbours`.split(
    '|',
  );
const MONTHS = 'January February March April May June July August September October November December'.split(' ');
const GENERIC_TITLES = ['Weekly links', 'Update', 'Photos', 'Back soon', 'Hello world!', 'Untitled', 'Monthly notes'];
const HONEST_TLDS: (readonly [string, number])[] = [
  ['com', 50],
  ['net', 8],
  ['org', 8],
  ['me', 5],
  ['io', 3],
  ['co.uk', 5],
  ['de', 4],
  ['nl', 2],
  ['blog', 2],
  ['dev', 2],
  ['ca', 2],
  ['com.au', 2],
  ['info', 3],
  ['xyz', 2],
  ['online', 1],
];
/** Blog platforms: [domain, addresses it pings from, other blogs' domains per hour from each]. */
const PLATFORMS: (readonly [string, number, number, number])[] = [
  // [domain, weight among platform blogs, addresses, background domains per address per hour]
  ['wordpress.com', 35, 3, 1500],
  ['blogspot.com', 30, 4, 800],
  ['tumblr.com', 12, 2, 400],
  ['substack.com', 10, 2, 120],
  ['ghost.io', 5, 1, 40],
  ['livejournal.com', 5, 1, 60],
  ['typepad.com', 3, 1, 10],
];

// Spam vocabulary: phrases from the splog studies' examples, some in pingd's SPAM_WORDS and some not
// (ugg boots, essay writing, garcinia): URL recall should not be 100% by construction.
const SPAM_PHRASES = [
  'cheap car insurance',
  'car insurance quotes',
  'payday loans',
  'online casino',
  'viagra online',
  'cheap viagra',
  'buy cialis',
  'weight loss pills',
  'replica watches',
  'cheap jerseys',
  'seo services',
  'bitcoin trading',
  'forex signals',
  'free movie download',
  'mortgage rates',
  'debt consolidation',
  'online poker',
  'ugg boots outlet',
  'essay writing service',
  'garcinia cambogia',
  'acai berry',
  'nike shoes',
  'web hosting',
  'hair loss',
  'credit repair',
  'dating sites',
  'sports betting',
  'diet supplements',
  'louis vuitton bags',
  'work from home',
];
const SPAM_PREFIX = ['best', 'top', 'buy', 'cheap', 'get', 'my', 'the', 'online', 'discount', 'free'];
const SPAM_SUFFIX = ['online', 'reviews', 'now', 'guide', 'tips', 'blog', 'store', 'info', 'today', 'hq'];
const SPAM_TLDS: (readonly [string, number])[] = [
  ['info', 35],
  ['com', 18],
  ['xyz', 10],
  ['top', 8],
  ['net', 7],
  ['biz', 6],
  ['org', 4],
  ['online', 3],
  ['pw', 2],
  ['ru', 2],
  ['click', 2],
  ['cn', 2],
  ['site', 1],
];
/** Where scrapers copy from besides the corpus's own news blogs: big sites outside it. */
const SOURCES =
  'bbc.co.uk theguardian.com techcrunch.com arstechnica.com reuters.com theverge.com wired.com nytimes.com engadget.com lifehacker.com'.split(
    ' ',
  );
const HEADLINE_A =
  'New Study Finds|Why Experts Say|Inside the|The Future of|How to Fix|What We Know About|Ten Reasons for|The Hidden Cost of|A Guide to|Breaking:'.split(
    '|',
  );
const HEADLINE_B =
  'Remote Work|Electric Cars|Coffee Prices|Solar Power|Smartphone Batteries|Home Loans|City Cycling|Sleep Science|Password Managers|Streaming Prices|Air Travel|Rent Control|Ocean Plastic|Quantum Chips|Four-Day Weeks'.split(
    '|',
  );

const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
const glue = (p: string) => p.replace(/ /g, '');
const hyph = (p: string) => p.replace(/ /g, '-');
const title = (p: string) => p.split(' ').map(cap).join(' ');
const slug = (s: string) =>
  s
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');

interface Draft {
  host: string;
  name: string;
  /** Ping addresses: one is chosen per ping. */
  addresses: string[];
}

/** An honest blog's own host and name (varied: people, hobbies, places, some commercial words). */
function honestIdentity(r: Rng, commercial: boolean): [string, string] {
  if (commercial) return r.pick(COMMERCIAL_HONEST)(r);
  const f = r.pick(FIRST);
  const l = r.pick(LAST);
  const shape = r.int(0, 8);
  switch (shape) {
    case 0:
      return [`${f}${l}`, `${cap(f)} ${cap(l)}`];
    case 1:
      return [`${f}-${l}`, `${cap(f)} ${cap(l)}'s weblog`];
    case 2: {
      const a = r.pick(ADJ);
      const n = r.pick(NOUN);
      return [`the${a}${n}`, `The ${cap(a)} ${cap(n)}`];
    }
    case 3: {
      const h = r.pick(HOBBY);
      return [`${f}s${h}`, `${cap(f)}'s ${cap(h)}`];
    }
    case 4: {
      const p = r.pick(PLACE);
      return [`notesfrom${p}`, `Notes from ${cap(p)}`];
    }
    case 5: {
      const t = r.pick(TOPIC);
      return [`${t}with${f}`, `${cap(t)} with ${cap(f)}`];
    }
    case 6: {
      const h = r.pick(HOBBY);
      const n = r.pick(NOUN);
      return [`${h}${n}`, `${cap(h)} ${cap(n)}`];
    }
    case 7:
      return [`${f}${l.charAt(0)}`, `${cap(f)} ${cap(l).charAt(0)}.`];
    default: {
      const t = r.pick(TOPIC);
      return [`${l}on${t}`, `${cap(l)} on ${cap(t)}`];
    }
  }
}

/**
 * An honest post's title: people's titles are sentences and rarely repeat, but short generic ones do
 * ("Weekly links", "Update"), one post in a hundred here, so a title shared by two honest blogs happens.
 */
function honestTitle(r: Rng): string {
  if (r.chance(0.01)) return r.pick(GENERIC_TITLES);
  const subject = r.pick([...HOBBY, ...TOPIC]);
  return r.weighted([
    [`${r.pick(OPENERS)} ${subject} ${r.pick(CLOSERS)}, ${r.pick(MONTHS)} ${r.int(1, 28)}`, 4],
    [`${cap(r.pick(ADJ))} ${subject}, ${r.pick(['day', 'week', 'part', 'take'])} ${r.int(2, 400)}`, 2],
    [`What ${cap(r.pick(FIRST))} taught me about ${subject} in ${cap(r.pick(PLACE))} (${r.pick(MONTHS)})`, 1],
    [`${r.int(3, 21)} ${r.pick(['things', 'notes', 'lessons', 'mistakes'])} from ${r.int(2, 30)} years of ${subject}`, 1],
  ] as const);
}

/** A splog's host label in one of the published shapes: glued, hyphenated, with digits. */
function spamLabel(r: Rng, phrase: string): string {
  const shape = r.weighted([
    ['glued', 40],
    ['hyphen', 30],
    ['digits', 15],
    ['plain', 15],
  ] as const);
  const pre = r.chance(0.6) ? r.pick(SPAM_PREFIX) + ' ' : '';
  const suf = r.chance(0.5) ? ' ' + r.pick(SPAM_SUFFIX) : '';
  const words = `${pre}${phrase}${suf}`;
  if (shape === 'glued') return glue(words);
  if (shape === 'hyphen') return hyph(words);
  if (shape === 'digits') return `${glue(phrase)}${r.int(100, 99999)}`;
  return glue(phrase);
}

function spamName(r: Rng, phrase: string): string {
  return r.weighted([
    [`${title(phrase)}`, 30],
    [`Best ${title(phrase)} ${new Date(START_MS).getUTCFullYear()}`, 20],
    [`${title(phrase)} | ${title(r.pick(SPAM_PHRASES))}`, 20],
    [`${cap(r.pick(SPAM_PREFIX))} ${title(phrase)} Online`, 15],
    ['Just another WordPress site', 15],
  ] as const);
}

/** Ping times on a timer: a fixed interval and a tiny jitter (Lin et al. 2008: splogs post self-similarly). */
function timer(r: Rng, start: number, end: number, intervalMs: number, jitter: number): number[] {
  const out: number[] = [];
  for (let t = start + r.next() * intervalMs; t < end; t += intervalMs) out.push(Math.round(t + (r.next() * 2 - 1) * jitter * intervalMs));
  return out.filter((t) => t >= start && t < end);
}

/** Poisson arrivals of the given mean gap: how people publish. */
function poisson(r: Rng, start: number, end: number, meanGapMs: number, max = Infinity): number[] {
  const out: number[] = [];
  for (let t = start + r.expo(meanGapMs); t < end && out.length < max; t += r.expo(meanGapMs)) out.push(Math.round(t));
  return out;
}

const sortNum = (a: number, b: number) => a - b;

/** The corpus for a seed. Defaults: 3,000 weblogs over 12 hours, ~72% spam, 30% held out. */
export function generateCorpus(opts: CorpusOptions = {}): Corpus {
  const seed = opts.seed ?? CORPUS_SEED;
  const n = opts.weblogs ?? 3000;
  const spamShare = opts.spamShare ?? 0.72;
  const heldOutShare = opts.heldOutShare ?? 0.3;
  const start = START_MS;
  const end = start + (opts.hours ?? 12) * HOUR;
  const r = prng(seed);
  const background: Record<string, number> = {};

  // Labels and kinds first: farms and scrapers need to know who else exists.
  const plan = Array.from({ length: n }, (_, index) => {
    const label: Label = r.chance(spamShare) ? 'spam' : 'honest';
    const kind: Kind =
      label === 'spam'
        ? r.weighted([
            ['keyword-host', 28],
            ['subdomain-farm', 30],
            ['scraper', 20],
            ['link-farm', 12],
            ['no-feed', 10],
          ] as const)
        : r.weighted([
            ['personal', 30],
            ['platform-hosted', 30],
            ['news', 10],
            ['sloppy-frequent', 12],
            ['broken-feed', 8],
            ['new-blog', 10],
          ] as const);
    return { index, label, kind };
  });

  // Platforms' ping addresses, with the blogs outside the corpus they also ping for.
  const platformAddrs = new Map<string, string[]>();
  PLATFORMS.forEach(([domain, , count, bg], p) => {
    const addrs = Array.from({ length: count }, (_, i) => `192.0.${10 + p}.${i + 1}`);
    for (const a of addrs) background[a] = bg;
    platformAddrs.set(domain, addrs);
  });
  // Shared hosting: a few dozen honest sites behind one address, few of them pinging in an hour.
  const sharedHosting = Array.from({ length: 12 }, (_, i) => `198.51.100.${i + 1}`);
  // Bulk pingers: VPSs that ping for many spam domains each: 30 for 3,000 weblogs, as many per splog in a
  // smaller sample (a sample of 700 with 30 of them gave each a handful of domains, not the farm a bulk
  // pinger is). The count never draws from the generator, so the 3,000-weblog corpus is as it was.
  const bulkPingers = Array.from({ length: Math.max(3, Math.round((30 * n) / 3000)) }, (_, i) => `203.0.113.${i + 1}`);
  let ownAddr = 0;
  const own = () => `10.${(ownAddr >> 16) & 255}.${(ownAddr >> 8) & 255}.${ownAddr++ & 255}`;

  // Subdomain farms: ~120 hosts each under one domain, pinged hourly in one burst from one or two addresses.
  const farmMembers = plan.filter((p) => p.kind === 'subdomain-farm');
  const farms = Array.from({ length: Math.max(1, Math.round(farmMembers.length / 120)) }, (_, f) => {
    const phrase = r.pick(SPAM_PHRASES);
    const tld = r.weighted(SPAM_TLDS);
    const domain = r.chance(0.5)
      ? `${spamLabel(r, phrase)}.${tld}`
      : `${r.pick(['blogs', 'news', 'daily', 'hub', 'zone'])}${r.int(1, 99)}${r.pick(['web', 'net', 'site'])}.${tld}`;
    return {
      domain,
      phrase,
      addresses: r.chance(0.5) ? [`203.0.114.${2 * f + 1}`] : [`203.0.114.${2 * f + 1}`, `203.0.114.${2 * f + 2}`],
      minute: r.int(0, 59) * MIN,
      spreadMs: r.int(2, 8) * MIN,
      everyMs: r.pick([HOUR, HOUR, 2 * HOUR, 2 * HOUR]),
    };
  });
  const farmOf = new Map(farmMembers.map((p, i) => [p.index, farms[i % farms.length]]));
  const farmSlot = new Map<number, number>();
  farmMembers.forEach((p, i) => farmSlot.set(p.index, Math.floor(i / farms.length)));

  // Link farms: a handful of money sites, each the target of many splogs.
  const moneySites = Array.from({ length: 6 }, () => `${glue(r.pick(SPAM_PHRASES))}-${r.pick(['store', 'shop', 'deals', 'direct'])}.com`);

  const weblogs: CorpusWeblog[] = [];
  const scraperPlans: { w: CorpusWeblog; address: string; cronMs: number; perRun: number; keepLink: boolean; jitter: number }[] = [];
  const usedHosts = new Set<string>();
  const unique = (host: string) => {
    let h = host;
    for (let i = 2; usedHosts.has(h); i++) h = host.replace(/^([^.]+)/, `$1${i}`);
    usedHosts.add(h);
    return h;
  };

  for (const p of plan) {
    const split = splitOf(p.index, heldOutShare);
    const w: CorpusWeblog = {
      index: p.index,
      url: '',
      name: '',
      label: p.label,
      kind: p.kind,
      split,
      pings: [],
      items: [],
      noFeed: false,
      outages: [],
      registeredPublisher: false,
      namesPingd: false,
    };
    let draft: Draft;
    let times: number[] = [];
    /** Whether a ping brings a new item (else the feed is as before). */
    let itemOnPing: (i: number) => boolean = () => true;
    let path = '/';
    if (p.label === 'honest') {
      const commercial = r.chance(0.1);
      const [label, name] = honestIdentity(r, commercial);
      const onPlatform = p.kind === 'platform-hosted' || (p.kind === 'new-blog' && r.chance(0.5));
      if (onPlatform) {
        const platform = r.weighted(PLATFORMS.map(([d, wt]) => [d, wt] as const));
        const host = unique(`${label.replace(/-/g, platform === 'blogspot.com' ? '-' : '')}.${platform}`);
        draft = { host, name, addresses: platformAddrs.get(platform)! };
      } else {
        const host = unique(`${r.chance(0.3) ? 'www.' : ''}${label}.${r.weighted(HONEST_TLDS)}`);
        draft = { host, name, addresses: [r.chance(0.25) ? r.pick(sharedHosting) : own()] };
        if (r.chance(0.15)) path = '/blog/';
      }
      switch (p.kind) {
        case 'personal':
        case 'platform-hosted': {
          times = poisson(r, start, end, r.pick([2, 4, 8, 16]) * HOUR, 8);
          if (times.length === 0) times = [start + Math.round(r.next() * (end - start))];
          // A post, then a second ping minutes later for an edit: nothing new the second time.
          for (const t of [...times]) if (r.chance(0.2)) times.push(t + r.int(2, 20) * MIN);
          times.sort(sortNum);
          const edits = new Set(times.filter((t, i) => i > 0 && t - times[i - 1] <= 20 * MIN && t - times[i - 1] >= 2 * MIN));
          itemOnPing = (i) => !edits.has(times[i]);
          break;
        }
        case 'news':
          times = poisson(r, start, end, r.int(25, 90) * MIN);
          itemOnPing = () => r.chance(0.92);
          break;
        case 'sloppy-frequent': {
          // A cron or plugin that pings whatever happened: a real cron is as regular as a splog's timer.
          const cron = r.chance(0.4);
          times = timer(r, start, end, r.pick([10, 15, 30, 60]) * MIN, cron ? 0.01 : 0.3);
          const posts = r.int(0, 3);
          const postAt = new Set(Array.from({ length: posts }, () => r.int(0, Math.max(0, times.length - 1))));
          itemOnPing = (i) => postAt.has(i);
          break;
        }
        case 'broken-feed': {
          times = poisson(r, start, end, r.pick([3, 6]) * HOUR, 6);
          if (times.length === 0) times = [start + Math.round(r.next() * (end - start))];
          const outcome = r.weighted([
            ['not_a_feed', 5],
            ['unreachable', 3],
            ['gone', 2],
          ] as const);
          // Broken all window (a theme printing HTML before the XML, a feed moved without a redirect), or for a while.
          const whole = r.chance(0.6);
          const from = whole ? start - HOUR : start + Math.round(r.next() * (end - start) * 0.5);
          w.outages.push({ fromMs: from, toMs: whole ? end + HOUR : from + r.int(1, 6) * HOUR, outcome });
          break;
        }
        case 'new-blog':
          times = poisson(r, start + Math.round(r.next() * (end - start) * 0.7), end, 2 * HOUR, 3);
          if (times.length === 0) times = [end - r.int(5, 120) * MIN];
          break;
      }
      w.registeredPublisher = r.chance(0.03);
      w.namesPingd = r.chance(0.04);
    } else {
      const phrase = r.pick(SPAM_PHRASES);
      const tld = r.weighted(SPAM_TLDS);
      // About one in five splogs of the keyword kinds lives on Blogger, as most of Kolari et al.'s did.
      const onBlogger = p.kind !== 'subdomain-farm' && r.chance(0.2);
      const label = spamLabel(r, phrase);
      const host = unique(onBlogger ? `${label}.blogspot.com` : `${r.chance(0.2) ? 'www.' : ''}${label}.${tld}`);
      const bulk = r.pick(bulkPingers);
      draft = {
        host,
        name: spamName(r, phrase),
        addresses: [onBlogger && r.chance(0.5) ? r.pick(platformAddrs.get('blogspot.com')!) : bulk],
      };
      // Some splog software randomises its pings: not every splog is on a timer.
      const irregular = r.chance(0.15);
      const timed = (every: number) =>
        irregular ? poisson(r, start, end, every) : timer(r, start, end, every, r.pick([0.005, 0.01, 0.02, 0.04]));
      switch (p.kind) {
        case 'keyword-host':
          times = timed(r.pick([15, 20, 30, 60, 120]) * MIN);
          itemOnPing = () => r.chance(0.7);
          break;
        case 'subdomain-farm': {
          const farm = farmOf.get(p.index)!;
          const slot = farmSlot.get(p.index)!;
          const sub = r.chance(0.5)
            ? `${hyph(r.pick(SPAM_PHRASES))}-${slot}`
            : `${r.pick(['blog', 'news', farm.phrase.split(' ')[0]])}${r.int(10, 9999)}`;
          draft = {
            host: unique(`${sub}.${farm.domain}`),
            name: r.chance(0.5) ? spamName(r, farm.phrase) : title(r.pick(SPAM_PHRASES)),
            addresses: farm.addresses,
          };
          const offset = farm.minute + Math.round(r.next() * farm.spreadMs);
          times = [];
          for (let t = start + offset; t < end; t += farm.everyMs) times.push(t + r.int(-20, 20) * 1000);
          itemOnPing = () => r.chance(0.8);
          break;
        }
        case 'scraper':
          draft.host = unique(
            r.weighted([
              [`${r.pick(TOPIC)}news${r.int(1, 999)}.${tld}`, 3],
              [`daily-${r.pick(TOPIC)}-news.${tld}`, 3],
              [`${r.pick(TOPIC)}hub.${tld}`, 2],
              [host, 4],
            ] as const),
          );
          draft.name = r.chance(0.5) ? `${cap(r.pick(TOPIC))} News` : draft.name;
          times = []; // set below, once the honest news items to copy exist
          break;
        case 'link-farm':
          times = timed(r.pick([30, 60, 120]) * MIN);
          break;
        case 'no-feed':
          w.noFeed = true;
          times = timed(r.pick([10, 20, 30, 60]) * MIN);
          break;
      }
    }
    w.url = `http://${draft.host}${path}`;
    w.name = draft.name;
    w.pings = times.filter((t) => t >= start && t < end).map((atMs) => ({ atMs, address: r.pick(draft.addresses) }));
    // Own items: a back catalogue before the window, then one at each ping that brings one.
    const base = w.url.replace(/\/$/, '');
    const ownItem = (t: number, k: number): CorpusItem => {
      const itemTitle =
        w.label === 'honest'
          ? honestTitle(r)
          : `${title(r.pick(SPAM_PHRASES))} ${r.pick(['Tips', 'Review', 'Guide', 'Deals', 'Secrets'])} ${r.int(1, 99999)}`;
      return {
        title: itemTitle,
        link: `${base}/${new Date(t).toISOString().slice(0, 7).replace('-', '/')}/${slug(itemTitle)}-${k}/`,
        atMs: t,
      };
    };
    if (!w.noFeed && w.kind !== 'scraper') {
      const back = w.kind === 'new-blog' ? 0 : r.int(3, 10);
      for (let k = 0; k < back; k++) w.items.push(ownItem(start - (back - k) * r.int(6, 72) * HOUR, k));
      w.pings.forEach((pg, i) => {
        if (itemOnPing(i) || (w.kind === 'new-blog' && w.items.length === 0))
          w.items.push(ownItem(pg.atMs - r.int(0, 30) * 1000, w.items.length));
      });
      w.items.sort((a, b) => a.atMs - b.atMs);
      // WordPress's first post is "Hello world!": the same title on every new WordPress blog.
      if (w.kind === 'new-blog' && w.items.length > 0 && r.chance(0.3))
        w.items[0] = {
          ...w.items[0],
          title: 'Hello world!',
          link: `${base}/${new Date(w.items[0].atMs).toISOString().slice(0, 7).replace('-', '/')}/hello-world/`,
        };
    }
    if (w.kind === 'link-farm') {
      const target = r.pick(moneySites);
      const share = 0.8 + r.next() * 0.2;
      w.items = w.items.map((it) => (r.chance(share) ? { ...it, link: `https://${target}/${slug(it.title)}` } : it));
    }
    if (p.label === 'honest' && !w.noFeed && r.chance(0.08)) {
      // FeedBurner rewrote every item's link to feedproxy.google.com: an honest feed whose links all go to one other site.
      w.items = w.items.map((it) => ({ ...it, link: `http://feedproxy.google.com/~r/${slug(w.name)}/~3/${slug(it.title)}` }));
    }
    if (w.kind === 'scraper')
      scraperPlans.push({
        w,
        address: draft.addresses[0],
        cronMs: r.pick([30, 60, 120]) * MIN,
        perRun: r.int(1, 3),
        keepLink: r.chance(0.5),
        jitter: r.pick([0.005, 0.02, 0.3]),
      });
    weblogs.push(w);
  }

  // Cross-posting: a few honest blogs publish each post on a platform mirror too (same title, two domains).
  const personal = weblogs.filter((w) => w.kind === 'personal' && w.items.length > 0);
  for (let i = 0; i + 1 < personal.length; i += 2) {
    if (!r.chance(0.1)) continue;
    const [a, b] = [personal[i], personal[i + 1]];
    const recent = a.items.filter((it) => it.atMs >= start);
    b.items = [
      ...b.items,
      ...recent.map((it) => ({
        ...it,
        link: it.link.replace(a.url.replace(/\/$/, ''), b.url.replace(/\/$/, '')),
        atMs: it.atMs + 5 * MIN,
      })),
    ].sort((x, y) => x.atMs - y.atMs);
    b.pings = [...b.pings, ...recent.map((it) => ({ atMs: it.atMs + 5 * MIN, address: b.pings[0]?.address ?? own() }))]
      .filter((pg) => pg.atMs < end)
      .sort((x, y) => x.atMs - y.atMs);
  }

  // Scrapers: a cron copies the newest items of a pool (big sites outside the corpus, and the corpus's news blogs).
  const external: CorpusItem[] = [];
  for (let t = start - 6 * HOUR; t < end; t += r.int(3, 12) * MIN) {
    const h = `${r.pick(HEADLINE_A)} ${r.pick(HEADLINE_B)}`;
    external.push({ title: h, link: `https://www.${r.pick(SOURCES)}/${slug(h)}-${r.int(1000, 9999)}`, atMs: t });
  }
  const newsItems = weblogs.filter((w) => w.kind === 'news').flatMap((w) => w.items);
  const pool = [...external, ...newsItems].sort((a, b) => a.atMs - b.atMs);
  for (const s of scraperPlans) {
    const times = timer(r, start, end, s.cronMs, s.jitter);
    const back = r.int(3, 8);
    for (let k = 0; k < back; k++) {
      const src = r.pick(pool.filter((it) => it.atMs < start));
      s.w.items.push({ ...src, link: s.keepLink ? src.link : `${s.w.url}${slug(src.title)}/`, atMs: start - (back - k) * HOUR });
    }
    for (const t of times) {
      const fresh = pool.filter((it) => it.atMs <= t && it.atMs > t - 6 * HOUR);
      for (let k = 0; k < s.perRun && fresh.length > 0; k++) {
        const src = r.pick(fresh.slice(-40));
        s.w.items.push({ ...src, link: s.keepLink ? src.link : `${s.w.url}${slug(src.title)}/`, atMs: t - 1000 });
      }
      s.w.pings.push({ atMs: t, address: s.address });
    }
    s.w.items.sort((a, b) => a.atMs - b.atMs);
  }
  return { seed, startMs: start, endMs: end, weblogs, backgroundDomainsPerHour: background };
}

/** A digest of the corpus (sha256 of its JSON): two runs of the same seed must give the same one. */
export function corpusDigest(c: Corpus): string {
  return createHash('sha256').update(JSON.stringify(c)).digest('hex').slice(0, 16);
}
