// The `ping` frames the database writes (event-repository.ts's pingFrame) against the frames events.ts
// formats from the same rows: byte for byte, on names, URLs and tags chosen to break JSON (quotes,
// backslashes, every control character, U+2028, astral characters, null columns) and on times at every edge of
// a millisecond. Every read the stream makes: the hub's (eventsAfter), a replay's (replayEvents) and a
// replay's whole window joined by the database (replayJoined: in position order across day partitions).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, type TestApp } from '../../helpers/app.js';
import { eventsAfter, type EventRow } from '../../../src/push/stream/event-repository.js';
import { replayEvents, replayJoined } from '../../../src/push/stream/replay-repository.js';
import { createDayPartition } from '../../../src/operations/retention/partition-repository.js';
import { formatFrame, toStreamEvent } from '../../../src/push/stream/events.js';

let t: TestApp;

const controls = Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)).join('');
const NAMES: string[] = [
  'plain',
  'A "quoted" \\ back\\slash / slash',
  `controls ${controls.slice(1)} and DEL \u007f`,
  'line\u2028separator\u2029para',
  'astral 😀 𝄞 and é ü 日本',
  '<tag attr="x">&amp;</tag>',
  '',
];
const TAGS: (string[] | null)[] = [null, [], ['Tech'], ['a "b"', 'c\\d', 'é😀'], ['tab\there', 'nl\nthere']];
// Microseconds past a whole second: the millisecond of each must be cut, never rounded.
const FRACTIONS = ['000000', '000001', '000999', '001000', '123456', '499999', '500000', '569999', '570000', '999999'];

before(async () => {
  t = await startApp({ PING_MIN_INTERVAL: 0, RENDER_SCHEDULER: false });
  const db = t.app.db;
  let n = 0;
  for (const name of NAMES) {
    for (const tags of TAGS) {
      const i = n++;
      const url = `http://w${i}.frames.example.org/${i % 3 === 0 ? 'p"a\\th?q=é&x=1' : ''}`;
      const [w] = await db.query<{ id: number }>(
        `insert into weblogs (url, name, first_ping_at, last_ping_at) values ($1, $2, now(), now()) returning id`,
        [url, name],
      );
      await db.query(
        `insert into pings (weblog_id, received_at, method, name, url, changes_url, rss_url, tags)
         values ($1, $2::timestamptz, $3, $4, $5, $6, $7, $8)`,
        [
          w.id,
          // Two days, alternating: ids interleave across the day partition and the default one.
          `2026-11-${i % 2 ? 28 : 29} 12:${String(i % 60).padStart(2, '0')}:07.${FRACTIONS[i % FRACTIONS.length]}+00`,
          i % 2 === 0 ? 'weblogUpdates.extendedPing' : 'ping "quoted"',
          name,
          url,
          i % 4 === 0 ? `${url}changes "x"` : null,
          i % 5 === 0 ? `${url}feed\u2028` : null,
          tags,
        ],
      );
      // Some weblogs held as spam: their frames say so.
      if (i % 7 === 0) await db.query(`insert into weblog_spam (weblog_id, url, score, held) values ($1, $2, 2, true)`, [w.id, url]);
    }
  }
  await createDayPartition(db, 'pings', 'pings_frames_day', new Date('2026-11-29T00:00:00Z'), new Date('2026-11-30T00:00:00Z'));
});

after(async () => {
  await t?.close();
});

/** The same pings read field by field, as formatFrame takes them. */
async function fieldRows(): Promise<Map<number, EventRow>> {
  const rows = await t.app.db.query<{
    id: number;
    name: string | null;
    url: string;
    changes_url: string | null;
    rss_url: string | null;
    tags: string[] | null;
    method: string | null;
    received_at: Date;
    held: boolean;
  }>(
    `select p.id, p.name, p.url, p.changes_url, p.rss_url, p.tags, p.method, p.received_at,
            exists (select 1 from weblog_spam s where s.weblog_id = p.weblog_id and s.held) as held
       from pings p order by p.id`,
  );
  return new Map(
    rows.map((r) => [
      Number(r.id),
      {
        type: 'ping',
        pos: Number(r.id),
        pingId: Number(r.id),
        url: r.url,
        tags: r.tags,
        method: r.method,
        outcome: null,
        held: r.held,
        frame: null,
        name: r.name,
        changesUrl: r.changes_url,
        rssUrl: r.rss_url,
        receivedAt: new Date(r.received_at),
        newItems: null,
      } satisfies EventRow,
    ]),
  );
}

function assertSameFrames(read: EventRow[], fields: Map<number, EventRow>): void {
  assert.equal(read.length, fields.size);
  for (const r of read) {
    assert.equal(typeof r.frame, 'string', `ping ${r.pos} comes with its frame`);
    const expected = formatFrame(fields.get(r.pos)!);
    assert.equal(r.frame, expected, `ping ${r.pos}`);
    // And the frame parses back to the fields (one line of JSON).
    const data = JSON.parse(r.frame!.split('\n')[2].slice('data: '.length)) as { name: unknown; tags: unknown };
    assert.deepEqual(data.name, fields.get(r.pos)!.name);
    assert.equal(toStreamEvent(r).frame, r.frame);
  }
}

test('the hub read: every ping frame the database writes is the frame formatted from its fields', async () => {
  const fields = await fieldRows();
  assert.equal(fields.size, NAMES.length * TAGS.length);
  assert.ok([...fields.values()].some((f) => f.held) && [...fields.values()].some((f) => !f.held));
  assertSameFrames(await eventsAfter(t.app.db, 'listed', 0, 1000), fields);
});

test('a replay read: the same frames, with and without a filter in the query', async () => {
  const fields = await fieldRows();
  const last = Math.max(...fields.keys());
  const all = { ping: true, verified: false, hosts: null, tags: null, methods: null, outcomes: null };
  assertSameFrames(await replayEvents(t.app.db, 'listed', 0, last, all), fields);
  const tagged = await replayEvents(t.app.db, 'listed', 0, last, { ...all, tags: ['tech'] });
  // The query keeps the `Tech` pings and, for the connection's own filter to judge, those with a non-ASCII tag.
  assert.equal(tagged.length, 2 * NAMES.length);
  assertSameFrames(tagged, new Map([...fields].filter(([pos]) => tagged.some((r) => r.pos === pos))));
});

test('a joined replay read: the frames of the rows, joined in position order across partitions; held weblogs only with spam', async () => {
  const [{ parts }] = await t.app.db.query<{ parts: number }>('select count(distinct tableoid)::int as parts from pings');
  assert.equal(parts, 2, 'the pings lie in two partitions');
  const fields = await fieldRows();
  const last = Math.max(...fields.keys());
  const plain = { ping: true, verified: false, hosts: null, tags: null, methods: null, outcomes: null };
  const rows = await replayEvents(t.app.db, 'listed', 0, last, plain);
  const frames = (rs: EventRow[]) => rs.map((r) => r.frame).join('');
  assert.ok(rows.some((r) => r.held) && rows.some((r) => !r.held));

  const withSpam = await replayJoined(t.app.db, 'listed', 0, last, plain, true);
  assert.equal(withSpam.pings.frames, frames(rows));
  assert.deepEqual([withSpam.pings.count, withSpam.pings.last], [rows.length, last]);
  const listed = rows.filter((r) => !r.held);
  const noSpam = await replayJoined(t.app.db, 'listed', 0, last, plain, false);
  assert.equal(noSpam.pings.frames, frames(listed));
  assert.deepEqual([noSpam.pings.count, noSpam.pings.last], [listed.length, listed.at(-1)!.pos]);

  // A window in the middle, with a method filter.
  const from = rows[5].pos;
  const upto = rows[25].pos;
  const quoted = await replayJoined(t.app.db, 'listed', from, upto, { ...plain, methods: ['ping "quoted"'] }, true);
  const expected = rows.filter((r) => r.pos > from && r.pos <= upto && r.method === 'ping "quoted"');
  assert.ok(expected.length > 5);
  assert.equal(quoted.pings.frames, frames(expected));
  const nothing = await replayJoined(t.app.db, 'listed', last, last + 500, plain, true);
  assert.deepEqual(nothing, { pings: { frames: '', count: 0, last: NaN }, verified: [] });
});
