// Test helpers for publishing: rows with chosen times (the only way to test hours and windows without
// sleeping), a strict XML parse by an independent parser (Python's expat), and decoding of responses.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import zlib from 'node:zlib';
import { XMLValidator } from 'fast-xml-parser';
import type { Queryable } from '../../src/platform/db/database.js';
import type { RenderSource } from '../../src/publishing/documents/document.js';

export interface TestPing {
  name: string;
  url: string;
  rssUrl?: string | null;
  /** When the ping was received. */
  at: Date | number;
  method?: string;
}

/**
 * Inserts accepted pings as intake would have at `at` (weblog upserted, ping_count incremented, a ping row,
 * the running total raised),
 * bypassing validation on purpose: publishing must stay well-formed whatever is in the database.
 */
export async function insertPings(q: Queryable, pings: TestPing[]): Promise<void> {
  for (const p of pings) {
    const at = new Date(p.at);
    const [w] = await q.query<{ id: number }>(
      `insert into weblogs as w (url, name, rss_url, first_ping_at, last_ping_at) values ($1, $2, $3, $4, $4)
       on conflict (url) do update set name = excluded.name, rss_url = coalesce(excluded.rss_url, w.rss_url),
         last_ping_at = greatest(w.last_ping_at, excluded.last_ping_at), ping_count = w.ping_count + 1
       returning id`,
      [p.url, p.name, p.rssUrl ?? null, at],
    );
    await q.query(`insert into pings (weblog_id, received_at, method, name, url, rss_url) values ($1, $2, $3, $4, $5, $6)`, [
      w.id,
      at,
      p.method ?? 'ping',
      p.name,
      p.url,
      p.rssUrl ?? null,
    ]);
  }
  await countAccepted(q, pings.length);
}

/** Adds to the running total of accepted pings, as intake's batch statement does (migrations/009_ping_totals.sql). */
async function countAccepted(q: Queryable, n: number): Promise<void> {
  if (n > 0)
    await q.query('insert into ping_totals as t (slot, n) values (0, $1) on conflict (slot) do update set n = t.n + excluded.n', [n]);
}

/**
 * `n` pings of `n` distinct weblogs, spread evenly over [fromMs, toMs), in one statement (bulk data for
 * multi-chunk documents). Names and URLs are `Weblog <i>` and `http://w<i>.example.com/`.
 */
export async function bulkPings(q: Queryable, n: number, fromMs: number, toMs: number, prefix = 'w'): Promise<void> {
  // In statements of 10,000: one of 60,000 outlasted the app's 5 s query timeout in CI beside the rest of
  // the suite (load 10-12).
  for (let from = 1; from <= n; from += BULK_STATEMENT)
    await bulkPingsStatement(q, n, from, Math.min(n, from + BULK_STATEMENT - 1), fromMs, toMs, prefix);
  await countAccepted(q, n);
}

const BULK_STATEMENT = 10_000;

async function bulkPingsStatement(
  q: Queryable,
  n: number,
  first: number,
  last: number,
  fromMs: number,
  toMs: number,
  prefix: string,
): Promise<void> {
  await q.query(
    `with s as (
       select i, timestamptz 'epoch' + ($2::bigint + ((i - 1) * ($3::bigint - $2::bigint) / $1)) * interval '1 millisecond' as at
         from generate_series($5::int, $6::int) i
     ), w as (
       insert into weblogs (url, name, first_ping_at, last_ping_at)
       select 'http://' || $4 || i || '.example.com/', 'Weblog ' || i, at, at from s
       returning id, url, name, last_ping_at
     )
     insert into pings (weblog_id, received_at, method, name, url)
     select w.id, w.last_ping_at, 'ping', w.name, w.url from w`,
    [n, fromMs, toMs, prefix, first, last],
  );
}

export interface Parsed {
  declaration: { version: string; encoding: string | null };
  root: { name: string; attrs: Record<string, string> };
  children: { name: string; attrs: Record<string, string> }[];
}

// The system interpreter when there is one: version-manager shims add latency and locks to every call.
const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

const EXPAT = `
import sys, json, xml.parsers.expat
data = sys.stdin.buffer.read()
out = {"declaration": None, "root": None, "children": [], "text": ""}
depth = [0]
p = xml.parsers.expat.ParserCreate()
p.ordered_attributes = False
def decl(version, encoding, standalone):
    out["declaration"] = {"version": version, "encoding": encoding}
def start(name, attrs):
    if depth[0] == 0:
        out["root"] = {"name": name, "attrs": attrs}
    elif depth[0] == 1:
        out["children"].append({"name": name, "attrs": attrs})
    else:
        raise ValueError("unexpected nesting: " + name)
    depth[0] += 1
def end(name):
    depth[0] -= 1
def chars(s):
    if s.strip():
        raise ValueError("unexpected text: " + repr(s))
p.XmlDeclHandler = decl
p.StartElementHandler = start
p.EndElementHandler = end
p.CharacterDataHandler = chars
try:
    p.Parse(data, True)
except Exception as e:
    sys.stderr.write("NOT WELL-FORMED: " + str(e))
    sys.exit(3)
print(json.dumps(out))
`;

/**
 * Parses a document with Python's expat, a strict XML 1.0 parser (it refuses control characters, bad
 * UTF-8, undefined entities, unescaped `<` or `&`, duplicate attributes, text where none belongs), and
 * with fast-xml-parser's validator; throws with the parser's message when it is not well-formed.
 */
export function strictParse(xml: Buffer | string): Parsed {
  const buf = Buffer.isBuffer(xml) ? xml : Buffer.from(xml, 'utf8');
  const r = spawnSync(PYTHON, ['-c', EXPAT], { input: buf, encoding: 'utf8', maxBuffer: 512 * 1024 * 1024, timeout: 60_000 });
  if (r.status !== 0) throw new Error(r.stderr || `python3 exited with ${r.status}`);
  const v = XMLValidator.validate(buf.toString('utf8'));
  if (v !== true) throw new Error(`fast-xml-parser: ${JSON.stringify(v)}`);
  const out = JSON.parse(r.stdout) as Parsed;
  if (!out.declaration) throw new Error('no XML declaration');
  return out;
}

/** The body of a response as bytes, decoded according to its Content-Encoding. */
export function decodeBody(raw: Buffer, contentEncoding: string | string[] | undefined): Buffer {
  if (contentEncoding === 'gzip') return zlib.gunzipSync(raw);
  if (contentEncoding === 'br') return zlib.brotliDecompressSync(raw);
  if (contentEncoding === undefined) return raw;
  throw new Error(`unexpected content-encoding ${String(contentEncoding)}`);
}

/** ms of a UTC date-time, for readable fixtures. */
export function utc(iso: string): number {
  const ms = Date.parse(iso.endsWith('Z') ? iso : `${iso}Z`);
  if (!Number.isFinite(ms)) throw new Error(`bad date ${iso}`);
  return ms;
}

/** A rendered document as one string: its head, every page, its foot. */
export async function sourceText(s: RenderSource): Promise<string> {
  let out = s.head;
  for await (const page of s.pages) for (const e of page) out += e.xml;
  return out + s.foot;
}

/** The database, counting the statements whose SQL matches `pattern` (a read a cache exists to avoid). */
export function countingQueries(q: Queryable, pattern: RegExp): { q: Queryable; count: () => number } {
  let n = 0;
  const wrapped: Queryable = Object.create(q);
  wrapped.query = ((sql: string, ...rest: unknown[]) => {
    if (pattern.test(sql)) n++;
    return (q.query as (...a: unknown[]) => unknown)(sql, ...rest);
  }) as Queryable['query'];
  return { q: wrapped, count: () => n };
}

/**
 * Random choices that are the same on every run and backend: `rand()` in [0, 1), and `url()`, a weblog
 * pinged before 40% of the time, else a new one from `newUrl` (`urls`: every one so far).
 */
export function seeded(seed: number, newUrl: () => string): { rand: () => number; url: () => string; urls: string[] } {
  const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const urls: string[] = [];
  const url = () => {
    if (urls.length > 0 && rand() < 0.4) return urls[Math.floor(rand() * urls.length)];
    const u = newUrl();
    urls.push(u);
    return u;
  };
  return { rand, url, urls };
}
