// The render caches' compact entries: text written into blocks reads back byte for byte (UTF-8, across block
// ends, larger than a block), lists made from one another share their text without disturbing each other,
// views and copies cover what they say, and compaction keeps every entry while dropping the rest.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { KeptEntries, TextBlocks, type KeptEntry } from '../../../src/publishing/documents/kept-entries.js';

const entries = (l: KeptEntries): KeptEntry[] => Array.from({ length: l.length }, (_, i) => l.entry(i));
const MB = 1 << 20;

describe('TextBlocks', () => {
  test('text reads back as written: UTF-8, entries that would cross a block end, one larger than a block', () => {
    const t = new TextBlocks();
    const texts = [
      ' <weblog name="Ærø &amp; 東京 🎉" url="https://x.example/"',
      'a'.repeat(MB - 10),
      'b'.repeat(40),
      'c'.repeat(MB + 5),
      'd',
    ];
    const refs = texts.map((s) => [t.add(s, Buffer.byteLength(s)), Buffer.byteLength(s)] as const);
    assert.deepEqual(
      refs.map(([ref, len]) => t.text(ref, len)),
      texts,
    );
    // The 40 bytes did not fit after the ~1 MB entry: they start a block of their own, as does the large one.
    assert.equal(refs[2][0] % MB, 0);
    assert.equal(refs[3][0] % MB, 0);
    assert.equal(
      t.bytes,
      texts.reduce((n, s) => n + Buffer.byteLength(s), 0),
    );
  });

  test('addFrom copies the bytes into its own blocks', () => {
    const a = new TextBlocks();
    const ref = a.add('héllo', 6);
    const b = new TextBlocks();
    b.add('x', 1);
    const copied = b.addFrom(a, ref, 6);
    assert.equal(b.text(copied, 6), 'héllo');
  });
});

describe('KeptEntries', () => {
  const e = (id: number): KeptEntry => ({ id, atUs: 1_764_000_000_000_000 + id, start: `w${id} ü` });

  test('entries keep their id, time (µs past 2^32) and text as the columns grow', () => {
    const all = Array.from({ length: 1000 }, (_, i) => e(i + 1));
    const l = KeptEntries.of(all);
    assert.equal(l.length, 1000);
    assert.deepEqual(entries(l), all);
    assert.equal(
      l.textBytes(),
      all.reduce((n, x) => n + Buffer.byteLength(x.start), 0),
    );
  });

  test('a list made with pushFrom shares the text; appending to either leaves the other as it was', () => {
    const a = KeptEntries.of([e(1), e(2), e(3)]);
    const b = new KeptEntries(a.text);
    b.pushFrom(a, 2);
    b.add(e(9));
    a.add(e(4));
    assert.deepEqual(entries(a), [e(1), e(2), e(3), e(4)]);
    assert.deepEqual(entries(b), [e(3), e(9)]);
  });

  test('view is a window onto the list; slice is a copy that truncate and appends do not reach', () => {
    const l = KeptEntries.of([e(1), e(2), e(3), e(4)]);
    assert.deepEqual(entries(l.view(1, 3)), [e(2), e(3)]);
    assert.deepEqual(entries(l.view(2, 2)), []);
    const tail = l.slice(2, 4);
    l.truncate(2);
    l.add(e(7));
    l.add(e(8));
    assert.deepEqual(entries(tail), [e(3), e(4)]);
    assert.deepEqual(entries(l), [e(1), e(2), e(7), e(8)]);
    // Appending to a view does not write into the list it looks at.
    const v = l.view(0, 2);
    v.add(e(5));
    assert.deepEqual(entries(l), [e(1), e(2), e(7), e(8)]);
    assert.deepEqual(entries(v), [e(1), e(2), e(5)]);
  });

  test('compacted keeps the entries and only their bytes; the list it came from still reads', () => {
    const l = KeptEntries.of(Array.from({ length: 100 }, (_, i) => e(i)));
    const kept = new KeptEntries(l.text);
    for (let i = 0; i < 100; i += 10) kept.pushFrom(l, i);
    const c = kept.compacted();
    assert.deepEqual(entries(c), entries(kept));
    assert.equal(c.text.bytes, kept.textBytes());
    assert.ok(l.text.bytes > 5 * c.text.bytes);
    assert.deepEqual(l.entry(55), e(55));
  });
});
