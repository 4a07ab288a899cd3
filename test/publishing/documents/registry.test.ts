// The document registry: one list the server routes and renders and `pingd render` renders.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DocumentRegistry } from '../../../src/publishing/documents/registry.js';
import { publishedDocuments } from '../../../src/publishing/documents/published.js';
import { changesDocument } from '../../../src/publishing/documents/changes.js';

test('publishedDocuments lists changes.xml, shortChanges.xml and /updates.xml, in that order', () => {
  assert.deepEqual(
    publishedDocuments()
      .list()
      .map((d) => [d.name, d.path, d.deltas]),
    [
      ['changes.xml', '/changes.xml', true],
      ['shortChanges.xml', '/shortChanges.xml', true],
      ['updates.xml', '/updates.xml', true],
    ],
  );
  assert.equal(publishedDocuments().get('/updates.xml')?.contentType, 'application/rss+xml; charset=utf-8');
  assert.equal(publishedDocuments().get('/nope.xml'), undefined);
});

test('a path or a name registered twice, or a relative path, is refused', () => {
  const r = new DocumentRegistry([changesDocument()]);
  assert.throws(() => r.register(changesDocument()), /document \/changes.xml is already registered/);
  assert.throws(() => r.register({ ...changesDocument(), path: '/other.xml' }), /already registered/);
  assert.throws(() => r.register({ ...changesDocument(), name: 'x', path: 'x.xml' }), /document path must start with \//);
  assert.equal(r.list().length, 1);
});

test('the app routes exactly the registered documents', async () => {
  const { startApp } = await import('../../helpers/app.js');
  const t = await startApp({ RENDER_SCHEDULER: false });
  try {
    for (const d of t.app.documents.list()) {
      const res = await t.app.inject({ method: 'GET', url: d.path });
      // Not rendered yet: the document's own 503, not a 404.
      assert.equal(res.statusCode, 503, d.path);
      assert.match(res.body, /has not been rendered yet/);
    }
    assert.equal((await t.app.inject({ method: 'GET', url: '/nope.xml' })).statusCode, 404);
  } finally {
    await t.close();
  }
});
