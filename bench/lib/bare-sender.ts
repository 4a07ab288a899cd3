// Owns the bare sender the push benchmark compares pingd with: a plain Node process that POSTs one body to
// every callback with `fetch`, 8 at a time (what a hub without a database, a queue or manners would do).
// Started by bench/push.ts with a JSON file {callbacks, body, contentType}; prints "ready", waits for a
// line on stdin, sends, then prints its CPU time in microseconds and exits.
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const CONCURRENCY = 8;

const job = JSON.parse(readFileSync(process.argv[2], 'utf8')) as { callbacks: string[]; body: string; contentType: string };
const body = Buffer.from(job.body, 'base64');
const rl = createInterface({ input: process.stdin });
process.stdout.write('ready\n');
rl.once('line', () => {
  void (async () => {
    const c0 = process.cpuUsage();
    let next = 0;
    let failed = 0;
    const worker = async () => {
      while (next < job.callbacks.length) {
        const url = job.callbacks[next++];
        try {
          const r = await fetch(url, { method: 'POST', body, headers: { 'content-type': job.contentType } });
          await r.arrayBuffer();
          if (r.status >= 300) failed++;
        } catch {
          failed++;
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const c = process.cpuUsage(c0);
    process.stdout.write(`${JSON.stringify({ cpuUs: c.user + c.system, failed })}\n`);
    rl.close();
  })();
});
