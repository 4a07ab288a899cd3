// Owns the SQL rssCloud reads about a resource (a feed) before it is pinged: the weblog that names the feed
// as its own (verification remembers it) and the feed's title, so that an rssCloud ping, which carries
// only the feed's URL, is stored under the weblog the other protocols use. Plain values in, plain rows out.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';

export interface ResourceOwner {
  /** The feed's title as verification last read it. */
  title: string | null;
  /** The weblog whose remembered feed this is (its latest pinged), if any. */
  weblogUrl: string | null;
  weblogName: string | null;
}

export async function resourceOwner(q: Queryable, feedUrl: string): Promise<ResourceOwner | undefined> {
  return withContext(`reading what is known of the feed ${feedUrl}`, async () => {
    const [r] = await q.query<{ title: string | null; weblog_url: string | null; weblog_name: string | null }>(
      `select f.title, w.url as weblog_url, w.name as weblog_name
         from feeds f
         left join lateral (select url, name from weblogs where feed_id = f.id order by last_ping_at desc limit 1) w on true
        where f.url = $1`,
      [feedUrl],
      { name: 'pingd_rsscloud_resource_owner' },
    );
    return r ? { title: r.title, weblogUrl: r.weblog_url, weblogName: r.weblog_name } : undefined;
  });
}
