// Owns when a subscribed feed topic that nobody pings is fetched again (WEBSUB_POLL_INTERVAL), as a pure
// function: never sooner than the interval, nor than the feed's own hints allow (RSS 2.0 <ttl> in minutes;
// RSS 1.0's sy:updatePeriod divided by sy:updateFrequency), and never once it is gone (410, the RSS Feed
// State document: a gone feed is never asked again).

export interface PollHints {
  ttl?: number;
  updatePeriod?: string;
  updateFrequency?: number;
}

const PERIOD_SEC: Record<string, number> = { hourly: 3600, daily: 86_400, weekly: 7 * 86_400, monthly: 30 * 86_400, yearly: 365 * 86_400 };

/** The least gap between two polls of the feed, in seconds: the interval, or longer when its hints ask. */
export function pollGapSec(intervalSec: number, hints: PollHints): number {
  let gap = intervalSec;
  if (typeof hints.ttl === 'number' && Number.isFinite(hints.ttl) && hints.ttl > 0) gap = Math.max(gap, hints.ttl * 60);
  const period = hints.updatePeriod ? PERIOD_SEC[hints.updatePeriod.trim().toLowerCase()] : undefined;
  if (period) {
    const freq = typeof hints.updateFrequency === 'number' && hints.updateFrequency >= 1 ? hints.updateFrequency : 1;
    gap = Math.max(gap, period / freq);
  }
  return gap;
}

/** Whether a poll of the feed is due now. */
export function pollDue(f: { lastFetchAt: Date | null; gone: boolean; hints: PollHints }, intervalSec: number, now = Date.now()): boolean {
  if (intervalSec <= 0 || f.gone) return false;
  if (f.lastFetchAt === null) return true;
  return now - f.lastFetchAt.getTime() >= pollGapSec(intervalSec, f.hints) * 1000;
}
