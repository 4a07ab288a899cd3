// Headless Chromium for the browser tests: Debian's /usr/bin/chromium (or CHROMIUM_PATH) driven by
// playwright-core, with every request checked to stay on loopback and every console error collected. When
// Chromium cannot start, the test fails and says how to install it: a browser test never passes unrun.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** As the machine's notes say: without the background-networking flags Chromium calls Google's hosts at start. */
const ARGS = [
  '--no-sandbox',
  '--headless',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-default-apps',
  '--disable-extensions',
];

export async function launchBrowser(): Promise<Browser> {
  const how = `Install it with \`apt-get install -y chromium\` (.ci/run does this when it is missing) or set CHROMIUM_PATH to a Chromium or Chrome binary.`;
  if (!existsSync(CHROMIUM)) throw new Error(`The browser tests need Chromium at ${CHROMIUM}, and there is none. ${how}`);
  try {
    return await chromium.launch({ executablePath: CHROMIUM, args: ARGS, timeout: 30_000 });
  } catch (err) {
    throw new Error(`Chromium at ${CHROMIUM} did not start: ${(err as Error).message.split('\n')[0]}. ${how}`, { cause: err });
  }
}

export interface WatchedPage {
  page: Page;
  context: BrowserContext;
  /** Console errors and uncaught exceptions, in order. */
  errors: string[];
  /** Requests the page tried to send off loopback (each was aborted). */
  offLoopback: string[];
  close(): Promise<void>;
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|localhost|\[::1\])$/;

/** A new page whose every request is checked: loopback goes on, anything else is aborted and recorded. */
export async function watchedPage(
  browser: Browser,
  opts: { width?: number; height?: number; colorScheme?: 'light' | 'dark' } = {},
): Promise<WatchedPage> {
  const context = await browser.newContext({
    viewport: { width: opts.width ?? 1100, height: opts.height ?? 900 },
    colorScheme: opts.colorScheme ?? 'light',
  });
  const errors: string[] = [];
  const offLoopback: string[] = [];
  await context.route('**/*', (route) => {
    const u = new URL(route.request().url());
    if ((u.protocol === 'http:' || u.protocol === 'https:' || u.protocol === 'ws:') && !LOOPBACK.test(u.hostname)) {
      offLoopback.push(u.href);
      return route.abort('blockedbyclient');
    }
    return route.continue();
  });
  const page = await context.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()} (${m.location().url})`);
  });
  page.on('pageerror', (e) => errors.push(`exception: ${e.message}`));
  return { page, context, errors, offLoopback, close: () => context.close() };
}

/** Closes the page after asserting it logged no console error and sent nothing off loopback. */
export async function closeClean(w: WatchedPage): Promise<void> {
  try {
    assert.deepEqual(w.errors, [], 'console errors');
    assert.deepEqual(w.offLoopback, [], 'requests that would have left loopback');
  } finally {
    await w.close();
  }
}
