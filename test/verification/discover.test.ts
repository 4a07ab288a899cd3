// Feed autodiscovery: the rss/atom/json alternate links of a homepage's head, in document order, resolved
// against the page and its <base href>; nothing after <body>, nothing commented out, no non-http schemes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { chooseFeed, discoverFeeds, type FeedLink } from '../../src/verification/discover.js';

const PAGE = 'http://blog.example.com/sub/';
const fixture = (name: string) => readFileSync(new URL(`../fixtures/feeds/${name}`, import.meta.url), 'utf8');

const head = (links: string) => `<!doctype html><html><head><title>t</title>\n${links}\n</head><body><p>hi</p></body></html>`;

test('homepage.html: the three feed links in document order, root-relative hrefs resolved', () => {
  assert.deepEqual(discoverFeeds(fixture('homepage.html'), PAGE), [
    { url: 'http://blog.example.com/feed.json', type: 'json' },
    { url: 'http://blog.example.com/atom.xml', type: 'atom', title: 'Atom' },
    { url: 'http://blog.example.com/rss.xml', type: 'rss', title: 'RSS' },
  ]);
});

test('homepage.html: the alternate link pasted in the body (/wrong.xml) is ignored', () => {
  const urls = discoverFeeds(fixture('homepage.html'), PAGE).map((l) => l.url);
  assert.ok(!urls.includes('http://blog.example.com/wrong.xml'), urls.join(' '));
});

test('links after <body> starts are ignored (inline)', () => {
  const html = head('<link rel="alternate" type="application/rss+xml" href="/head.xml">').replace(
    '<p>hi</p>',
    '<p>hi</p><link rel="alternate" type="application/atom+xml" href="/body.xml">',
  );
  assert.deepEqual(
    discoverFeeds(html, PAGE).map((l) => l.url),
    ['http://blog.example.com/head.xml'],
  );
});

test('relative hrefs resolve against the page URL; the fragment is dropped', () => {
  const html = head(
    [
      '<link rel="alternate" type="application/rss+xml" href="feed.xml">',
      '<link rel="alternate" type="application/atom+xml" href="../atom.xml#top">',
      '<link rel="alternate" type="application/rss+xml" href="//cdn.example.net/rss">',
    ].join('\n'),
  );
  assert.deepEqual(
    discoverFeeds(html, PAGE).map((l) => l.url),
    ['http://blog.example.com/sub/feed.xml', 'http://blog.example.com/atom.xml', 'http://cdn.example.net/rss'],
  );
});

test('<base href> is honoured for the links after it (and is itself resolved against the page)', () => {
  const absolute = head('<base href="https://static.example.org/blog/">\n<link rel="alternate" type="application/rss+xml" href="rss.xml">');
  assert.deepEqual(discoverFeeds(absolute, PAGE), [{ url: 'https://static.example.org/blog/rss.xml', type: 'rss' }]);
  const relative = head('<base href="/other/">\n<link rel="alternate" type="application/rss+xml" href="rss.xml">');
  assert.deepEqual(discoverFeeds(relative, PAGE), [{ url: 'http://blog.example.com/other/rss.xml', type: 'rss' }]);
});

test('commented-out links are ignored, the links around them kept', () => {
  const html = head(
    [
      '<link rel="alternate" type="application/rss+xml" href="/one.xml">',
      '<!-- <link rel="alternate" type="application/rss+xml" href="/commented.xml"> -->',
      '<!--',
      '<link rel="alternate" type="application/atom+xml" href="/multiline.xml">',
      '-->',
      '<link rel="alternate" type="application/atom+xml" href="/two.xml">',
    ].join('\n'),
  );
  assert.deepEqual(
    discoverFeeds(html, PAGE).map((l) => l.url),
    ['http://blog.example.com/one.xml', 'http://blog.example.com/two.xml'],
  );
});

test('homepage-attrs.html: uppercase, single-quoted and unquoted attributes; &amp; in href decoded', () => {
  const links = discoverFeeds(fixture('homepage-attrs.html'), PAGE);
  assert.deepEqual(
    links.map(({ url, type }) => ({ url, type })),
    [
      { url: 'http://pennywise.example.org/feeds/main/?format=rss&cat=all', type: 'rss' },
      { url: 'http://pennywise.example.org/feeds/main/?format=atom&cat=all', type: 'atom' },
    ],
  );
});

test('attribute spellings (inline): uppercase names and values, quotes of both kinds, none, rel lists', () => {
  const html = head(
    [
      `<LINK REL="ALTERNATE" TYPE="APPLICATION/RSS+XML" HREF="/upper.xml">`,
      `<link rel='alternate' type='application/atom+xml' href='/single.xml'>`,
      `<link rel=alternate type=application/rss+xml href=/unquoted.xml>`,
      `<link rel="home alternate" type="application/rss+xml; charset=utf-8" href="/list.xml?a=1&amp;b=2">`,
    ].join('\n'),
  );
  assert.deepEqual(
    discoverFeeds(html, PAGE).map((l) => l.url),
    [
      'http://blog.example.com/upper.xml',
      'http://blog.example.com/single.xml',
      'http://blog.example.com/unquoted.xml',
      'http://blog.example.com/list.xml?a=1&b=2',
    ],
  );
});

test('non-http schemes (javascript:, ftp:, data:, mailto:) are dropped', () => {
  const html = head(
    [
      '<link rel="alternate" type="application/rss+xml" href="javascript:alert(1)">',
      '<link rel="alternate" type="application/rss+xml" href="ftp://files.example.com/feed.xml">',
      '<link rel="alternate" type="application/rss+xml" href="data:application/rss+xml,feed">',
      '<link rel="alternate" type="application/atom+xml" href="mailto:me@example.com">',
      '<link rel="alternate" type="application/atom+xml" href="https://blog.example.com/ok.xml">',
    ].join('\n'),
  );
  assert.deepEqual(discoverFeeds(html, PAGE), [{ url: 'https://blog.example.com/ok.xml', type: 'atom' }]);
});

test('links that are not feed alternates are not listed', () => {
  const html = head(
    [
      '<link rel="stylesheet" type="application/rss+xml" href="/not-alternate.xml">',
      '<link rel="alternate" type="text/html" href="/fr/">',
      '<link rel="alternate" hreflang="fr" href="/fr/">',
      '<link rel="alternate" type="application/rss+xml">',
    ].join('\n'),
  );
  assert.deepEqual(discoverFeeds(html, PAGE), []);
});

test('homepage-none.html: no feed links', () => {
  assert.deepEqual(discoverFeeds(fixture('homepage-none.html'), PAGE), []);
});

test('chooseFeed: the first rss or atom link, skipping a JSON feed listed first', () => {
  assert.deepEqual(chooseFeed(discoverFeeds(fixture('homepage.html'), PAGE)), {
    url: 'http://blog.example.com/atom.xml',
    type: 'atom',
    title: 'Atom',
  });
  const links: FeedLink[] = [
    { url: 'http://a.example/feed.json', type: 'json' },
    { url: 'http://a.example/rss.xml', type: 'rss' },
    { url: 'http://a.example/atom.xml', type: 'atom' },
  ];
  assert.equal(chooseFeed(links)?.url, 'http://a.example/rss.xml');
});

test('chooseFeed: undefined when there are only JSON feeds, or none', () => {
  assert.equal(chooseFeed([{ url: 'http://a.example/feed.json', type: 'json' }]), undefined);
  assert.equal(chooseFeed([]), undefined);
  assert.equal(chooseFeed(discoverFeeds(fixture('homepage-none.html'), PAGE)), undefined);
});
