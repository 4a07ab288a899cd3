// Owns the SQL a WebSub publish reads before it becomes a ping: what verification remembered of each
// topic's feed (its own <link> and title), so the ping names the feed's weblog. Plain values in, plain rows out.
import type { Queryable } from '../../platform/db/database.js';
import { withContext } from '../../platform/errors.js';

export interface TopicSite {
  topic: string;
  /** The feed's own <link> (RSS), alternate link (Atom) or home_page_url (JSON Feed), when a fetch found one. */
  siteUrl: string | null;
  title: string | null;
}

/** What is known of each topic's feed (by the URL it was named by, or where it is fetched now). */
export async function topicSites(q: Queryable, topics: readonly string[]): Promise<Map<string, TopicSite>> {
  return withContext('reading the feeds of published topics', async () => {
    const rows = await q.query<{ topic: string; site_url: string | null; title: string | null }>(
      `select t.topic, f.site_url, f.title
         from unnest($1::text[]) as t(topic)
         cross join lateral (select site_url, title from feeds where url = t.topic or fetch_url = t.topic
                              order by (url = t.topic) desc, (site_url is not null) desc limit 1) f`,
      [topics],
    );
    return new Map(rows.map((r) => [r.topic, { topic: r.topic, siteUrl: r.site_url, title: r.title }]));
  });
}
