// Owns the ping load of the failover tests: clients pinging pingd's /RPC2 over HTTP, each sending its next
// ping as soon as the last is answered (a new weblog each time, so the throttle never refuses one), and
// what every answer was (acknowledged, refused with flerror 1, or no ping reply at all), with its times.
import { methodCall, readReply, uniqueUrl } from '../helpers/app.js';

export interface Sent {
  url: string;
  /** performance.now() when sent and when answered. */
  start: number;
  end: number;
  status?: number;
  flerror?: boolean;
  message?: string;
  transport?: string;
}

export async function ping(base: string, url: string): Promise<Sent> {
  const start = performance.now();
  try {
    const res = await fetch(`${base}/RPC2`, {
      method: 'POST',
      headers: { 'content-type': 'text/xml' },
      body: methodCall('weblogUpdates.ping', ['Failover', url]),
      signal: AbortSignal.timeout(30_000),
    });
    const r = readReply(res.status, await res.text());
    return { url, start, end: performance.now(), status: res.status, flerror: r.flerror, message: r.message };
  } catch (err) {
    return { url, start, end: performance.now(), transport: (err as Error).message };
  }
}

/** `concurrency` clients pinging over HTTP, each its next ping as soon as the last is answered. */
export function load(base: string, concurrency: number, prefix = 'failover') {
  const sent: Sent[] = [];
  let stopped = false;
  const workers = Array.from({ length: concurrency }, async () => {
    while (!stopped) sent.push(await ping(base, uniqueUrl(prefix)));
  });
  return {
    sent,
    acked: () => sent.filter((s) => s.flerror === false).length,
    async stop() {
      stopped = true;
      await Promise.all(workers);
    },
  };
}
