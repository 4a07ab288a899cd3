// Test harness for verification: ping a weblog through XML-RPC and wait until its verification job is
// settled, reading the job rows directly (the service never reads one job back by ping).
import type { Queryable } from '../../src/platform/db/database.js';
import { methodCall, rpc, type TestApp } from '../helpers/app.js';
import { waitFor } from '../helpers/wait.js';

export interface JobRow {
  ping_id: number;
  outcome: string | null;
  http_status: number | null;
  attempts: number;
  due_at: Date;
}

export async function jobsOf(q: Queryable, weblogUrl: string): Promise<JobRow[]> {
  return q.query<JobRow>(
    `select v.ping_id, v.outcome, v.http_status, v.attempts, v.due_at from ping_verifications v
       join pings p on p.id = v.ping_id where p.url = $1 order by v.ping_id`,
    [weblogUrl],
  );
}

/** extendedPing (with a feed URL) or ping (without); fails the test unless the ping is accepted. */
export async function ping(t: TestApp, url: string, rssUrl?: string, name = 'A weblog'): Promise<void> {
  const body = rssUrl ? methodCall('weblogUpdates.extendedPing', [name, url, url, rssUrl]) : methodCall('weblogUpdates.ping', [name, url]);
  const r = await rpc(t.app, body);
  if (r.flerror) throw new Error(`ping refused: ${r.message}`);
}

/** Waits until the weblog's latest job has an outcome; returns it. */
export async function settled(t: TestApp, weblogUrl: string, timeoutMs = 15_000): Promise<JobRow> {
  let jobs: JobRow[] = [];
  return waitFor(
    async () => {
      jobs = await jobsOf(t.app.db, weblogUrl);
      const last = jobs[jobs.length - 1];
      return last?.outcome ? last : undefined;
    },
    {
      what: () => `a verification outcome for ${weblogUrl} (jobs: ${JSON.stringify(jobs)})`,
      timeoutMs,
      intervalMs: 25,
      between: () => t.app.verification.worker?.wake(),
    },
  );
}

/** Pings and waits for the outcome. */
export async function pingAndSettle(t: TestApp, url: string, rssUrl?: string): Promise<JobRow> {
  await ping(t, url, rssUrl);
  return settled(t, url);
}

export async function weblogApi(t: TestApp, url: string): Promise<{ status: number; body: any }> {
  const r = await t.app.inject({ method: 'GET', url: `/api/weblogs?url=${encodeURIComponent(url)}` });
  return { status: r.statusCode, body: r.json() };
}

/** The RSS Feed State document's XML redirect, verbatim (its closing tag lacks the slash), to `to`. */
export function xmlRedirectTo(example: Buffer, to: string): string {
  return example.toString('utf8').replace('http://feeds.feedburner.com/TheRssBlog', to);
}
