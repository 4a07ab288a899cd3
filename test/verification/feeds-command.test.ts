// `pingd feeds show|reset` as a real process on a database a verification wrote: exit codes and output.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { startApp } from '../helpers/app.js';
import { startFeedServer, bytes } from '../helpers/feed-server.js';
import { pingAndSettle } from './helpers.js';
import { parseArgs } from 'node:util';
import { FEEDS_OPTIONS, feedsCommand } from '../../src/verification/feeds-command.js';
import { EXIT, openDb } from '../../src/cli.js';
import { CLI } from '../helpers/cli.js';

const ROOT = new URL('../../', import.meta.url).pathname;

test('pingd feeds show prints a feed or a weblog, reset clears gone; unknown is 1, bad usage 2', { timeout: 120_000 }, async () => {
  const s = await startFeedServer('127.0.0.12');
  const t = await startApp({
    VERIFY_PINGS: 'mark',
    FETCH_ALLOW_PRIVATE: true,
    FETCH_HOST_INTERVAL_MS: 0,
    PING_MIN_INTERVAL: 0,
    RENDER_SCHEDULER: false,
  });
  const feed = `${s.origin}/gone.xml`;
  const blog = `${s.origin}/cli/`;
  try {
    await t.app.ready();
    s.route('/gone.xml', bytes('', {}, 410));
    assert.equal((await pingAndSettle(t, blog, feed)).outcome, 'gone');
  } finally {
    // The embedded database has one owner: the app lets go before the command opens it.
    await t.app.close();
    await s.close();
  }
  const env = { ...process.env, LOG_LEVEL: 'silent', DATABASE_URL: t.config.DATABASE_URL ?? '', DATA_DIR: t.config.DATA_DIR };
  const cli = (...args: string[]) =>
    spawnSync(process.execPath, [...CLI, 'feeds', ...args], { cwd: ROOT, env, encoding: 'utf8', timeout: 60_000 });
  // The command in this process too (a process costs seconds): its output and exit code as the CLI returns them.
  const run = async (...args: string[]) => {
    const out: string[] = [];
    const err: string[] = [];
    const { values, positionals } = parseArgs({ args, options: FEEDS_OPTIONS, allowPositionals: true });
    const status = await feedsCommand(values, positionals, t.config, {
      openDb,
      EXIT,
      out: (s) => void out.push(`${s}\n`),
      err: (s) => void err.push(`${s}\n`),
    });
    return { status, stdout: out.join(''), stderr: err.join('') };
  };
  try {
    const shown = cli('show', feed, '--json');
    assert.equal(shown.status, 0, shown.stderr);
    const f = JSON.parse(shown.stdout).feed;
    assert.equal(f.url, feed);
    assert.equal(f.gone, true);
    assert.equal(f.lastStatus, 410);

    const reset = cli('reset', feed);
    assert.equal(reset.status, 0, reset.stderr);
    assert.equal(reset.stdout, `reset ${feed}: not gone, no failures, no backoff\n`);
    assert.equal(JSON.parse((await run('show', feed, '--json')).stdout).feed.gone, false);

    const byWeblog = await run('show', blog, '--json');
    assert.equal(byWeblog.status, 0, byWeblog.stderr);
    const w = JSON.parse(byWeblog.stdout);
    assert.equal(w.verification.outcome, 'gone');
    assert.equal(w.feed.url, feed);

    const unknown = await run('show', 'http://unknown.example/');
    assert.equal(unknown.status, 1);
    assert.equal(unknown.stderr, 'pingd feeds: no feed or weblog http://unknown.example/\n');
    const usage = await run('shout', feed);
    assert.equal(usage.status, 2);
    assert.match(usage.stderr, /^pingd feeds: unknown subcommand "shout"\nUsage: pingd feeds show <url>/);
  } finally {
    await t.db.drop();
  }
});
