// Regression: the outbound User-Agent promised a page about the server but sent the bare product token
// (package.json names no project page). Now: FETCH_CONTACT_URL, else PUBLIC_URL's home page.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startApp } from '../../helpers/app.js';
import { PINGD_VERSION } from '../../../src/platform/fetch/user-agent.js';

test("the outbound User-Agent links FETCH_CONTACT_URL, else PUBLIC_URL's home page", async () => {
  for (const [overrides, want] of [
    [{ PUBLIC_URL: 'https://ping.example.net' }, `pingd/${PINGD_VERSION} (+https://ping.example.net/)`],
    [
      { PUBLIC_URL: 'https://ping.example.net', FETCH_CONTACT_URL: 'https://ops.example.org/pingd' },
      `pingd/${PINGD_VERSION} (+https://ops.example.org/pingd)`,
    ],
    [{}, `pingd/${PINGD_VERSION}`],
  ] as const) {
    const t = await startApp(overrides);
    try {
      assert.equal(t.app.fetcher.userAgent, want);
    } finally {
      await t.close();
    }
  }
});
