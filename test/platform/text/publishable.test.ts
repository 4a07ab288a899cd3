// What pingd republishes of a stranger's text: http(s) links only, HTML as plain text, titles without
// invisible characters. Each hostile shape gets its exact result.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanLine, htmlToText, publishableLink, stripInvisible } from '../../../src/platform/text/publishable.js';

test('links: only absolute http(s), relative ones resolved against the document', () => {
  const base = 'http://blog.example.com/feed/rss.xml';
  const cases: [string | null, string | null][] = [
    ['http://blog.example.com/p/1', 'http://blog.example.com/p/1'],
    ['  HTTPS://Blog.Example.com/p?q=1  ', 'https://blog.example.com/p?q=1'],
    ['/2026/11/post', 'http://blog.example.com/2026/11/post'],
    ['javascript:alert(document.cookie)', null],
    [' JaVaScRiPt:alert(1)', null],
    // URL parsing removes tabs and newlines (WHATWG URL): this is javascript: too.
    ['java\nscript:alert(1)', null],
    ['data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==', null],
    ['vbscript:msgbox(1)', null],
    ['mailto:a@example.com', null],
    ['http://user:pass@blog.example.com/', null],
    ['http://', null],
    ['', null],
    [null, null],
    [`http://blog.example.com/${'a'.repeat(3000)}`, null],
  ];
  for (const [raw, want] of cases) assert.equal(publishableLink(raw, base), want, JSON.stringify(raw));
  assert.equal(publishableLink('/relative'), null, 'a relative link with nothing to resolve it against');
});

test('titles: bidi controls, zero-width characters and the BOM are removed; ZWJ sequences and scripts kept', () => {
  assert.equal(stripInvisible('\u202eevil\u202c txt.exe'), 'evil txt.exe');
  assert.equal(stripInvisible('a\u200bb\u2066c\u2069d\ufeffe\u00adf\u061cg\u200eh\u200fi'), 'abcdefghi');
  assert.equal(
    stripInvisible('\u{1F468}\u200D\u{1F469}\u200D\u{1F467} and \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645'),
    '\u{1F468}\u200D\u{1F469}\u200D\u{1F467} and \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645',
  );
  assert.equal(stripInvisible('ctl\u0000\u0007\u009f end'), 'ctl end');
  assert.equal(cleanLine('  two\n\tlines \u202e here  ', 100), 'two lines here');
  assert.equal(cleanLine('x'.repeat(50), 10), `${'x'.repeat(9)}…`);
});

test('summaries: HTML becomes the text a reader sees; scripts, styles and frames are dropped', () => {
  const cases: [string, string | null][] = [
    ['<p>Hello <b>world</b></p><p>again</p>', 'Hello world again'],
    ['<script>alert(1)</script>Text', 'Text'],
    ['before<iframe src="javascript:alert(1)">fallback</iframe>after', 'beforeafter'],
    ['<style>p{}</style><a href="javascript:alert(1)">click</a>', 'click'],
    ['<img src=x onerror=alert(1)>caption', 'caption'],
    ['Tips &amp; tricks &lt;script&gt; &#8217; &rsquo;', 'Tips & tricks <script> ’ ’'],
    ['<!-- hidden --><![CDATA[x]]>shown', 'shown'],
    ['<svg><script>alert(1)</script></svg>', null],
    ['a < b and c > d', 'a < b and c > d'],
    ['   ', null],
  ];
  for (const [html, want] of cases) assert.equal(htmlToText(html, 4000), want, html);
  assert.equal(htmlToText(`<p>${'word '.repeat(10_000)}</p>`, 20), 'word word word word…');
});
