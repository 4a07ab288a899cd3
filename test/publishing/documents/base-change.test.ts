// Regression: changing PUBLIC_URL (or PORT, which the default base is made of) left /updates.xml with the
// old absolute channel link until its content changed; the base is now part of the document's fingerprint.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestDatabase, startApp } from '../../helpers/app.js';

test('a new PUBLIC_URL is in /updates.xml at the next render, with no new item', async () => {
  const db = await createTestDatabase({ migrated: true });
  try {
    const channelLink = async (publicUrl: string) => {
      const t = await startApp({ PUBLIC_URL: publicUrl, RENDER_SCHEDULER: false, PUBLISH_POINTER_TTL_MS: 0 }, db);
      try {
        await t.app.renderer.tick({});
        const r = await t.app.inject({ method: 'GET', url: '/updates.xml' });
        assert.equal(r.statusCode, 200);
        return /<channel>[\s\S]*?<link>([^<]*)<\/link>/.exec(r.body)?.[1];
      } finally {
        await t.app.close();
      }
    };
    assert.equal(await channelLink('https://a.example.net'), 'https://a.example.net/');
    assert.equal(await channelLink('https://b.example.net'), 'https://b.example.net/');
  } finally {
    await db.drop();
  }
});
