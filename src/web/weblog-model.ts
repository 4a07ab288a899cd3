// Owns what the "did my ping arrive?" page says about a weblog, as a pure function of what was read: its
// pings and this instance's refusals in one list, newest first, and where it is listed now.
import { archivePath, hourStart } from '../publishing/documents/archive.js';
import type { WeblogView } from '../verification/feed-repository.js';
import type { RefusalSeen } from './recent-refusals.js';
import type { WeblogPing } from './weblog-repository.js';

export interface ListedDocument {
  path: string;
  name: string;
  windowSec: number;
}

export interface PingRow {
  at: string;
  atText: string;
  method: string;
  outcome: string;
  ok: boolean;
  archive: string | null;
}

/** How each intake method is named to a person (the log stores the short names). */
const METHOD_LABEL: Readonly<Record<string, string>> = {
  ping: 'weblogUpdates.ping',
  extendedPing: 'weblogUpdates.extendedPing',
  pingSiteForm: 'GET /pingSiteForm',
  rssPing: 'rssPing',
  websub: 'WebSub publish',
  rssCloud: 'rssCloud.ping',
};
const methodLabel = (m: string) => METHOD_LABEL[m] ?? m;

/** A time as a person reads it on these pages: `2026-11-23 07:27:01` (UTC). */
export const utc = (t: number | string | Date) => new Date(t).toISOString().slice(0, 19).replace('T', ' ');

/** "accepted", with the verification's outcome when there is one. */
function acceptedOutcome(p: WeblogPing, listedOnlyVerified: boolean): string {
  if (p.verification === null) return 'accepted';
  if (p.verification === 'pending')
    return listedOnlyVerified ? 'accepted, verification pending (listed once verified)' : 'accepted, verification pending';
  return `accepted, ${p.verification.replace(/_/g, ' ')}${p.httpStatus ? ` (HTTP ${p.httpStatus})` : ''}`;
}

/** What the page says of a weblog the operator removed from the lists (`pingd weblogs remove`). */
export const removedText = (at: Date): string =>
  `Removed by the operator at ${utc(at)} UTC: its pings arrived and are kept, but this server lists it in no document (changes.xml, shortChanges.xml, the hourly archives, updates.xml), its later pings included.`;
/** "Where it appears" for each document, once removed. */
export const REMOVED_APPEARANCE = 'not listed: removed by the operator';

/** What the page says of a weblog held as spam (SPAM_FILTER=hold): its pings arrived, and why it is held. */
export function heldText(s: { score: number; pinned: 'allow' | 'deny' | null }, threshold: number): string {
  const why =
    s.pinned === 'deny'
      ? 'the operator marked it as spam'
      : `its spam score is ${s.score.toFixed(2)}, above this server's limit of ${threshold.toFixed(2)}, for the reasons below`;
  return `Held as likely spam: its pings arrived and are kept, but this server lists it in no document (changes.xml, shortChanges.xml, the hourly archives, updates.xml) and sends it to no subscriber while ${why}.`;
}
/** "Where it appears" for each document, while held. */
export const HELD_APPEARANCE = 'not listed: held as likely spam';

/** What each reason of a score adds, as the page shows it: `+0.45`, `-0.35`. */
export const reasonWeight = (w: number): string => `${w >= 0 ? '+' : '−'}${Math.abs(w).toFixed(2)}`;

/** `unlisted`: the operator removed the weblog or it is held as spam, so no archive lists its pings. */
export function pingRows(
  pings: readonly WeblogPing[],
  refusals: readonly RefusalSeen[],
  listedOnlyVerified: boolean,
  unlisted = false,
): PingRow[] {
  const rows: (PingRow & { ms: number })[] = [];
  for (const p of pings) {
    const ms = p.receivedAt.getTime();
    const listed = !unlisted && (!listedOnlyVerified || p.verification === 'verified');
    rows.push({
      ms,
      at: p.receivedAt.toISOString(),
      atText: utc(ms),
      method: methodLabel(p.method),
      outcome: acceptedOutcome(p, listedOnlyVerified),
      ok: true,
      archive: listed ? archivePath(hourStart(ms)) : null,
    });
  }
  for (const r of refusals) {
    rows.push({
      ms: r.at,
      at: new Date(r.at).toISOString(),
      atText: utc(r.at),
      method: methodLabel(r.method),
      outcome: `refused: ${r.reason.replace(/_/g, ' ')}`,
      ok: false,
      archive: null,
    });
  }
  return rows.sort((a, b) => b.ms - a.ms).map(({ ms: _ms, ...r }) => r);
}

/** Where the weblog is listed now: each window document, by the time of its last accepted ping. */
export function appearances(
  w: Pick<WeblogView, 'lastPingAt' | 'verification'>,
  docs: readonly ListedDocument[],
  now: number,
  listedOnlyVerified: boolean,
  /** Why it is listed nowhere (REMOVED_APPEARANCE, HELD_APPEARANCE), or null. */
  unlisted: string | null = null,
): { path: string; name: string; text: string }[] {
  const age = (now - w.lastPingAt.getTime()) / 1000;
  return docs.map((d) => {
    let text: string;
    if (unlisted !== null) text = unlisted;
    else if (listedOnlyVerified && w.verification?.outcome !== 'verified')
      text = 'listed once a verification finds something new in its feed';
    else if (age < d.windowSec)
      text = `listed (pinged ${Math.max(0, Math.round(age))} s ago; the list covers the last ${d.windowSec >= 3600 ? `${d.windowSec / 3600} hour` : `${d.windowSec / 60} minutes`}, and is refreshed every few seconds)`;
    else
      text = `not listed now: its last ping is older than the ${d.windowSec >= 3600 ? `${d.windowSec / 3600} hour` : `${d.windowSec / 60} minutes`} it covers`;
    return { path: d.path, name: d.name, text };
  });
}
