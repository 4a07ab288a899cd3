// Owns what publishing lists under VERIFY_PINGS=require: the weblogs whose latest *verified* ping falls in
// a window (changes.xml, shortChanges.xml) and the verified pings of an hour (archives), read through
// intake's window queries with verification's column and condition, so the documents render them alike.
import { hourWindow, weblogWindow } from '../intake/ping/window-repository.js';
import { tsParam as TS } from '../platform/db/sql-time.js';

/** weblogs.last_verified_at: the receive time of the weblog's latest verified ping (set by the verifier). */
const verifiedWeblogs = weblogWindow('last_verified_at');
// The job is written with its ping's received_at (the same statement): bounding the jobs by the window's
// own bounds ($1, $2, as hourWindow passes them) makes an archive read the hour's jobs through
// ping_verifications_received_at, not every verified job kept (a hash join over all of them was planned).
const verifiedPings = hourWindow(
  `exists (select 1 from ping_verifications v where v.ping_id = pings.id and v.received_at >= ${TS(1)} and v.received_at < ${TS(2)} and v.outcome = 'verified')`,
);

export const verifiedWeblogWindowStats = verifiedWeblogs.stats;
export const verifiedWeblogWindowPage = verifiedWeblogs.page;
export const verifiedHourStats = verifiedPings.stats;
export const verifiedHourPage = verifiedPings.page;
