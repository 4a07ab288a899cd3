// Every scan pingd runs over fetched text (feeds, homepages: written by whoever pings), pumped to the
// largest body verification reads (FETCH_MAX_BYTES, 5 MiB) in adversarial shapes: nested and repeated
// comments, unclosed tags, long attribute runs, references without end. Each call must come back; the
// earlier patterns were exponential (the XML redirect) or quadratic (comments, <link, <skipHours, tag
// stripping) and took seconds at 200 KB, so at 5 MiB they would run for hours: the test's timeout is the
// hang detector, not a speed measurement (bench/hardening.ts measures). Shapes are fixed, then generated
// by fast-check from the same tokens (fixed seed, FUZZ_SEED to change).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { xmlRedirect, listHint, parseFeed } from '../../src/verification/feed-parser.js';
import { discoverFeeds } from '../../src/verification/discover.js';
import readDocument from '../../src/verification/document-task.js';
import { cleanLine, htmlToText, publishableLink } from '../../src/platform/text/publishable.js';
import { decodeXml } from '../../src/platform/xml/decode.js';
import { FUZZ_SEED } from './generators.js';

const MAX = 5 * 1024 * 1024;

/** `head`, then `token` repeated to fill MAX characters, then `tail`. */
const pump = (token: string, head = '', tail = '') =>
  head + token.repeat(Math.max(1, Math.floor((MAX - head.length - tail.length) / token.length))) + tail;

const SHAPES: Record<string, string> = {
  'empty comments before the root': pump('<!---->', '', '<rss version="2.0"><channel/></rss>'),
  'unclosed comments': pump('<!--'),
  'nested comments': pump('<!--<!--', '', '-->'),
  'processing instructions': pump('<?a?>', '<?xml version="1.0"?>'),
  'unclosed processing instructions': pump('<?'),
  '<link without >': pump('<link ', '<html><head>'),
  '<link with an unclosed quote': pump('<link rel="alternate" href="', '<head>'),
  'attribute runs': pump(' a="x"', '<link', '>'),
  'unquoted attribute runs': pump(' a=b', '<link'),
  '<skipHours without >': pump('<skipHours', '<rss version="2.0"><channel>'),
  '<skipHours> never closed': pump('<skipHours><hour>1</hour>', '<rss version="2.0"><channel>'),
  '<newLocation without >': pump('<newLocation', '<redirect>'),
  '<redirect> inside comments': pump('<!--<redirect>-->'),
  'open elements': pump('<svg>'),
  'script data': pump('<!--<script>', '<script>'),
  'entities without end': pump('&amp', '<p>'),
  'numeric references': pump('&#x1F600', '<p>'),
  '"<" runs': pump('<'),
  whitespace: pump(' \n\t'),
};

/** Every scan of fetched text, on one text. Returns something of each so nothing is optimised away. */
function scanAll(text: string): unknown[] {
  const body = Buffer.from(text);
  return [
    xmlRedirect(text),
    listHint(text, 'skipHours', 'hour'),
    listHint(text, 'skipDays', 'day'),
    discoverFeeds(text, 'http://hostile.example/'),
    htmlToText(text, 4000),
    cleanLine(text, 1024),
    publishableLink(text.slice(0, 4096), 'http://hostile.example/'),
    decodeXml(body, 'text/html; charset=utf-8').length,
  ];
}

test('every scan of fetched text comes back on each adversarial shape at 5 MiB', { timeout: 240_000 }, () => {
  for (const [name, text] of Object.entries(SHAPES)) {
    assert.ok(text.length > MAX - 64, name);
    assert.equal(scanAll(text).length, 8, name);
  }
});

test('the whole reading of a document (feedsmith included) comes back on each shape at 1 MiB', { timeout: 240_000 }, () => {
  // feedsmith's own parser runs only here: in the server it runs on a worker thread under a budget.
  for (const [name, text] of Object.entries(SHAPES)) {
    const body = new Uint8Array(Buffer.from(text.slice(0, 1024 * 1024)));
    const page = readDocument({ kind: 'page', body, contentType: 'text/html', url: 'http://hostile.example/' });
    const feed = readDocument({
      kind: 'feed',
      body,
      contentType: 'text/xml',
      url: 'http://hostile.example/feed',
      seen: [],
      firstFetch: false,
    });
    assert.equal(page.kind, 'page', name);
    assert.ok(['feed', 'redirect', 'not_a_feed'].includes(feed.kind), `${name}: ${feed.kind}`);
  }
});

const TOKENS = [
  '<!--',
  '-->',
  '<!---->',
  '<?',
  '?>',
  '<',
  '>',
  '/>',
  '<link ',
  'rel="alternate" ',
  'type="application/rss+xml" ',
  'href="',
  '"',
  "'",
  '=',
  ' a',
  '<skipHours',
  '</skipHours>',
  '<hour>',
  '</hour>',
  '<redirect',
  '<newLocation',
  '<![CDATA[',
  ']]>',
  '&amp',
  '&#',
  '<script>',
  '</script>',
  '<svg>',
  '<body',
  ' ',
  '\n',
];

test('property: any repetition of adversarial tokens, pumped to 5 MiB, comes back from every scan', { timeout: 240_000 }, () => {
  fc.assert(
    fc.property(fc.array(fc.constantFrom(...TOKENS), { minLength: 1, maxLength: 6 }), (tokens) => {
      assert.equal(scanAll(pump(tokens.join(''))).length, 8);
    }),
    { seed: FUZZ_SEED, numRuns: 3 },
  );
});

test('the earlier exponential shape reads as the feed it is', () => {
  const text =
    '<!---->'.repeat(40) + '<rss version="2.0"><channel><title>t</title><item><title>i</title><guid>g</guid></item></channel></rss>';
  assert.equal(xmlRedirect(text), undefined);
  const parsed = parseFeed(Buffer.from(text), 'text/xml');
  assert.equal(parsed.kind, 'feed');
  assert.equal(parsed.kind === 'feed' && parsed.items.length, 1);
  // And a redirect after comments is still one, in the specification's own malformed spelling.
  assert.deepEqual(
    xmlRedirect(
      `<?xml version="1.0"?>${'<!-- c -->'.repeat(40)}\n<redirect>\n<newLocation>http://new.example/feed<newLocation>\n</redirect>`,
    ),
    { newLocation: 'http://new.example/feed' },
  );
});
