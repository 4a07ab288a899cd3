// Owns what publishing lists under VERIFY_PINGS=require: the weblogs whose latest *verified* ping falls in
// a window (changes.xml, shortChanges.xml) and the verified pings of an hour (archives), read through
// intake's window queries with verification's column and condition, so the documents render them alike.
import { hourWindow, weblogWindow } from '../intake/ping/window-repository.js';

/** weblogs.last_verified_at: the receive time of the weblog's latest verified ping (set by the verifier). */
const verifiedWeblogs = weblogWindow('last_verified_at');
const verifiedPings = hourWindow("exists (select 1 from ping_verifications v where v.ping_id = pings.id and v.outcome = 'verified')");

export const verifiedWeblogWindowStats = verifiedWeblogs.stats;
export const verifiedWeblogWindowPage = verifiedWeblogs.page;
export const verifiedHourStats = verifiedPings.stats;
export const verifiedHourPage = verifiedPings.page;
