// Regressions: rss_pings that cost a lot before any check (docs/design/hostile-input.md, "Limits").
// ~210 KB of attributes or empty elements took ~250 ms of parsing, even for a weblog the throttle refuses
// anyway; element nesting was refused beyond 64 levels inside the payload and 101 outside it, where the
// documentation says 100. Speed itself is measured by benchmarks, not here: these tests pin the answers.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, uniqueUrl, type TestApp } from '../../helpers/app.js';
import { readRssPingReply } from './helpers.js';
import { findPayloadsBySite, findPingsByUrl } from '../../helpers/rows.js';

/** RSSPING_BODY_LIMIT's default: every body here is as large as a request may be. */
const BODY_LIMIT = 262_144;

let open: TestApp; // no throttle: every body goes as far as it can
let throttled: TestApp; // the default throttle (300 s)

before(async () => {
  open = await startApp({ PING_MIN_INTERVAL: 0, RSSPING_VERIFY_HASH_URI: false });
  throttled = await startApp({ RSSPING_VERIFY_HASH_URI: false });
});

after(async () => {
  await open?.close();
  await throttled?.close();
});

async function post(t: TestApp, body: string) {
  const res = await t.app.inject({ method: 'POST', url: '/rssping', headers: { 'content-type': 'text/xml' }, payload: body });
  return { ...readRssPingReply(res.statusCode, res.body), headers: res.headers };
}

/** The body for the largest n that fits the body limit (searched near a linear estimate: building is not free). */
function fill(make: (n: number) => string): string {
  const base = Buffer.byteLength(make(0));
  const per = (Buffer.byteLength(make(100)) - base) / 100;
  let lo = 0;
  let hi = Math.ceil((2 * (BODY_LIMIT - base)) / per);
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (Buffer.byteLength(make(mid)) <= BODY_LIMIT) lo = mid;
    else hi = mid - 1;
  }
  const body = make(lo);
  assert.ok(Buffer.byteLength(body) > BODY_LIMIT - 1024, 'the body is as large as a request may be');
  return body;
}

/** An rss_ping for `site` with these payload contents and further outer elements. */
const rssPing = (site: string, payload: string, outer = '') =>
  `<rss_ping version="2"><site_name>Costly</site_name><site_uri>${site}</site_uri><feed_uri>${site}feed</feed_uri>${outer}<payload type="RSS 2.0">${payload}</payload></rss_ping>`;
const item = (site: string, inside: string) => `<item><title>T</title><link>${site}post</link>${inside}</item>`;
const attrs = (n: number, name = 'a') => Array.from({ length: n }, (_, i) => ` ${name}${i}="1"`).join('');

const ELEMENTS = 'The rss_ping has more than 1,000 elements (payload included).';
const ATTRIBUTES = 'The rss_ping has more than 1,000 attributes (payload included).';
const OTHER = 'The rss_ping has more than 1,000 comments, CDATA sections and processing instructions.';
const NESTED_PAYLOAD = 'The payload is not well-formed XML (elements nested deeper than 100 levels, counting from <rss_ping>).';
const NESTED_OUTER = 'The rss_ping is not well-formed XML (elements nested deeper than 100 levels, counting from <rss_ping>).';

test('REGRESSION: 256 KiB of elements, attributes, namespaces, comments or items was parsed in full (~250 ms) before any check; now refused by count', async () => {
  const site = uniqueUrl('costly');
  const cases: [string, string, string][] = [
    ['empty elements in the payload', fill((n) => rssPing(site, item(site, '<a/>'.repeat(n)))), ELEMENTS],
    ['paired elements in the payload', fill((n) => rssPing(site, item(site, '<a></a>'.repeat(n)))), ELEMENTS],
    [
      'a feed of many items',
      fill((n) =>
        rssPing(
          site,
          `<rss version="2.0"><channel><title>C</title>${`<item><title>T</title><link>${site}p</link></item>`.repeat(n)}</channel></rss>`,
        ),
      ),
      ELEMENTS,
    ],
    ['unknown elements around the payload', fill((n) => rssPing(site, item(site, ''), '<x/>'.repeat(n))), ELEMENTS],
    ['a stray "<" repeated in text', fill((n) => rssPing(site, item(site, `<description>${'a <b'.repeat(n)}</description>`))), ELEMENTS],
    [
      'attributes on one payload element',
      fill((n) => rssPing(site, item(site, `<x${attrs(n)}/>`))),
      'An element of the payload has more than 64 attributes.',
    ],
    [
      'namespace declarations on the item',
      fill((n) => rssPing(site, `<item${attrs(n, 'xmlns:p')}><title>T</title><link>${site}post</link></item>`)),
      'An element of the payload has more than 64 attributes.',
    ],
    [
      'attributes on the <payload> start tag',
      fill((n) => rssPing(site, item(site, '')).replace('<payload type="RSS 2.0"', `<payload type="RSS 2.0"${attrs(n)}`)),
      'An element of the rss_ping has more than 64 attributes.',
    ],
    [
      'unquoted attributes around the payload',
      fill((n) => rssPing(site, item(site, ''), `<x${attrs(n).replace(/"/g, '')}/>`)),
      'An element of the rss_ping has more than 64 attributes.',
    ],
    ['attributes over many elements', fill((n) => rssPing(site, item(site, '<x a="1" b="2" c="3" d="4"/>'.repeat(n)))), ATTRIBUTES],
    ['comments', fill((n) => rssPing(site, item(site, '<!---->'.repeat(n)))), OTHER],
    ['CDATA sections', fill((n) => rssPing(site, item(site, `<description>${'<![CDATA[x]]>'.repeat(n)}</description>`))), OTHER],
    ['processing instructions', fill((n) => rssPing(site, item(site, '<?a?>'.repeat(n)))), OTHER],
    [
      'feed_uri elements',
      fill((n) => rssPing(site, item(site, ''), `<feed_uri>${site}f</feed_uri>`.repeat(n))),
      'The rss_ping has more than 20 <feed_uri> elements.',
    ],
    ['nested elements in the payload', fill((n) => rssPing(site, item(site, '<a>'.repeat(n) + '</a>'.repeat(n)))), NESTED_PAYLOAD],
    ['unclosed elements in the payload', fill((n) => rssPing(site, item(site, '<a>'.repeat(n)))), NESTED_PAYLOAD],
    ['nested elements around the payload', fill((n) => rssPing(site, item(site, ''), '<a>'.repeat(n) + '</a>'.repeat(n))), NESTED_OUTER],
  ];
  for (const [what, body, message] of cases) {
    const r = await post(open, body);
    assert.deepEqual([r.status, r.flerror, r.message], [400, true, message], what);
  }
  assert.equal((await findPingsByUrl(open.app.db, site)).length, 0, 'nothing stored');
});

test('REGRESSION: unquoted attributes split by a space only the decoded text has (U+2000, U+00A0, a vertical tab) escaped the count', async () => {
  const site = uniqueUrl('spaces');
  let k = 0;
  const x = (attributes: number, sep: string) => `<x ${Array.from({ length: attributes }, () => `a${k++}=1`).join(sep)}/>`;
  const spread = (elements: number, attributes: number, sep: string) =>
    rssPing(site, item(site, ''), Array.from({ length: elements }, () => x(attributes, sep)).join(''));
  const cases: [string, Buffer, string, string][] = [
    [
      'U+2000 in UTF-8, one element',
      Buffer.from(spread(100, 240, '\u2000')),
      'text/xml',
      'An element of the rss_ping has more than 64 attributes.',
    ],
    ['U+2000 in UTF-8, many elements', Buffer.from(spread(40, 60, '\u2000')), 'text/xml', ATTRIBUTES],
    [
      'U+00A0 in ISO-8859-1',
      Buffer.from(spread(100, 240, '\u00a0'), 'latin1'),
      'text/xml; charset=iso-8859-1',
      'An element of the rss_ping has more than 64 attributes.',
    ],
    ['a vertical tab', Buffer.from(spread(100, 240, '\v')), 'text/xml', 'An element of the rss_ping has more than 64 attributes.'],
  ];
  for (const [what, body, contentType, message] of cases) {
    const res = await open.app.inject({ method: 'POST', url: '/rssping', headers: { 'content-type': contentType }, payload: body });
    const r = readRssPingReply(res.statusCode, res.body);
    assert.deepEqual([r.status, r.flerror, r.message], [400, true, message], what);
  }
  assert.equal((await findPingsByUrl(open.app.db, site)).length, 0, 'nothing stored');
});

interface Counts {
  elements: number;
  attributes: number;
  /** attributes on the payload's <item> */
  onOneElement: number;
  /** comments, CDATA sections and processing instructions */
  otherMarkup: number;
  /** nesting, <rss_ping> being 1 */
  depth: number;
  feeds: number;
}

const AT_THE_LIMITS: Counts = { elements: 1000, attributes: 1000, onOneElement: 64, otherMarkup: 1000, depth: 100, feeds: 20 };

/**
 * A legitimate rss_ping with exactly these counts, filled to the body limit with an escaped-HTML description
 * (text and references): <rss_ping version> (1 attribute), site_name, site_uri, the feeds, payload; in the
 * payload an <item> with the attributes, title, link, description, the other markup, a chain of nested
 * elements down to `depth`, and the remaining elements and attributes as <x a0="1" …/>.
 */
function atCounts(site: string, c: Counts): string {
  const fixed = 4 + c.feeds + 4 + (c.depth - 3);
  const xs = c.elements - fixed;
  const spread = c.attributes - 1 - c.onOneElement;
  assert.ok(xs > 0 && spread >= 0 && spread <= 64 * xs, 'counts that can be built');
  const x = Array.from({ length: xs }, (_, i) => `<x${attrs(Math.floor(spread / xs) + (i < spread % xs ? 1 : 0))}/>`).join('');
  const other = ['<!-- c -->', '<![CDATA[ c ]]>', '<?pi c?>'];
  const markup = Array.from({ length: c.otherMarkup }, (_, i) => other[i % 3]).join('');
  const chain = '<d>'.repeat(c.depth - 3) + 'deep' + '</d>'.repeat(c.depth - 3);
  const feeds = Array.from({ length: c.feeds }, (_, i) => `<feed_uri>${site}feed${i}.xml</feed_uri>`).join('');
  return fill(
    (n) =>
      `<rss_ping version="2"><site_name>At the limits</site_name><site_uri>${site}</site_uri>${feeds}<payload>` +
      `<item${attrs(c.onOneElement, 'xmlns:n')}><title>At the limits</title><link>${site}post</link>${markup}${chain}${x}` +
      `<description>${'&lt;p&gt;Caf&#233; &amp; cr&#xE8;me, &quot;quoted&quot; text. &lt;/p&gt;\n'.repeat(n)}</description></item></payload></rss_ping>`,
  );
}

test('a legitimate rss_ping at every limit is accepted; one more of anything is refused with its reason', async () => {
  const site = uniqueUrl('limits');
  const ok = await post(open, atCounts(site, AT_THE_LIMITS));
  assert.deepEqual([ok.status, ok.flerror], [200, false], ok.message);
  const [row] = await findPayloadsBySite(open.app.db, site);
  assert.deepEqual([row.headline, row.item_uri], ['At the limits', `${site}post`]);
  assert.match(row.summary ?? '', /^Café & crème, "quoted" text\. Café & crème/);

  const over: [Partial<Counts>, string][] = [
    [{ elements: 1001 }, ELEMENTS],
    [{ attributes: 1001 }, ATTRIBUTES],
    [{ onOneElement: 65 }, 'An element of the payload has more than 64 attributes.'],
    [{ otherMarkup: 1001 }, OTHER],
    [{ depth: 101 }, NESTED_PAYLOAD],
    [{ feeds: 21 }, 'The rss_ping has more than 20 <feed_uri> elements.'],
  ];
  for (const [more, message] of over) {
    const r = await post(open, atCounts(uniqueUrl('over'), { ...AT_THE_LIMITS, ...more }));
    assert.deepEqual([r.status, r.flerror, r.message], [400, true, message], JSON.stringify(more));
  }
});

test('REGRESSION: nesting was refused beyond 64 levels in the payload and 101 around it; now 100 counting from <rss_ping>, payload included', async () => {
  // <rss_ping> 1, <payload> 2, <item> 3, then <a> down to the depth wanted.
  const inPayload = (site: string, depth: number, leaf: string) =>
    rssPing(site, item(site, '<a>'.repeat(depth - 4) + leaf + '</a>'.repeat(depth - 4)));
  // <rss_ping> 1, then <o> down to the depth wanted, beside the payload.
  const around = (site: string, depth: number) => rssPing(site, item(site, ''), '<o>'.repeat(depth - 1) + 'x' + '</o>'.repeat(depth - 1));
  for (const [what, body, message] of [
    ['payload, 100 deep', inPayload(uniqueUrl('deep'), 100, '<a>x</a>'), null],
    ['payload, 101 deep', inPayload(uniqueUrl('deep'), 101, '<a>x</a>'), NESTED_PAYLOAD],
    ['payload, an empty element at 100', inPayload(uniqueUrl('deep'), 100, '<a/>'), null],
    ['payload, an empty element at 101', inPayload(uniqueUrl('deep'), 101, '<a/>'), NESTED_PAYLOAD],
    ['around the payload, 100 deep', around(uniqueUrl('deep'), 100), null],
    ['around the payload, 101 deep', around(uniqueUrl('deep'), 101), NESTED_OUTER],
  ] as const) {
    const r = await post(open, body);
    if (message === null) assert.deepEqual([r.status, r.flerror], [200, false], `${what}: ${r.message}`);
    else assert.deepEqual([r.status, r.flerror, r.message], [400, true, message], what);
  }
});

test("REGRESSION: a throttled weblog's rss_ping was parsed in full before the throttle answered; now the throttle answers first", async () => {
  const site = uniqueUrl('throttled');
  const first = await post(throttled, rssPing(site, item(site, '<description>First.</description>')));
  assert.equal(first.status, 200, first.message);
  // As large as a request may be, within every count limit, and refused by the parser if it were parsed:
  // its payload's last element is never closed.
  const broken = (s: string) =>
    fill((n) => rssPing(s, item(s, `<description>${'&lt;b&gt;bold&lt;/b&gt; '.repeat(n)}</description><guid>x`)));
  const fresh = uniqueUrl('not-throttled');
  const parsed = await post(throttled, broken(fresh));
  assert.equal(parsed.status, 400, "a weblog that is not throttled gets the parser's answer");
  assert.match(
    parsed.message,
    /^The payload is not well-formed XML \(Expected closing tag 'guid' \(opened in line 1, col \d+\) instead of closing tag 'item'\., line 1\)\.$/,
  );
  const again = await post(throttled, broken(site));
  assert.deepEqual([again.status, again.flerror], [429, true], again.message);
  assert.match(
    again.message,
    new RegExp(
      `^${site.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} was pinged less than 300 seconds ago; please ping again after \\S+Z \\(in \\d+ seconds\\)\\.$`,
    ),
  );
  assert.ok(Number(again.headers['retry-after']) > 0 && Number(again.headers['retry-after']) <= 300);
  // Beyond the count limits the pre-scan's refusal comes first: it needs no database.
  const costly = await post(
    throttled,
    fill((n) => rssPing(site, item(site, '<a/>'.repeat(n)))),
  );
  assert.deepEqual([costly.status, costly.message], [400, ELEMENTS]);
  assert.equal((await findPingsByUrl(throttled.app.db, site)).length, 1, 'only the first ping is stored');
});
