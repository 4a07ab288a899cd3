// Owns the consumers of the stream benchmark, in a process of their own (so they do not share the load
// generator's CPU): N connections to /stream that record, for every ping event, the time from the ping's
// receivedAt (the database's clock: same machine) to its arrival. Prints one JSON line on SIGTERM or stdin end.
//
//   node --import tsx bench/lib/stream-clients.ts <base url> <connections>
import http from 'node:http';

const [base, nArg] = process.argv.slice(2);
const n = Number(nArg);
const latencies: number[] = [];
let events = 0;
let connected = 0;
let failed = 0;
const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });

function connect(record: boolean): void {
  http
    .get(`${base}/stream?types=ping`, { agent, headers: { accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) {
        failed++;
        res.resume();
        return;
      }
      connected++;
      if (connected === n) process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
      res.setEncoding('utf8');
      let buf = '';
      res.on('data', (chunk: string) => {
        if (!record) return;
        const now = Date.now();
        buf += chunk;
        let end: number;
        while ((end = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const at = frame.indexOf('"receivedAt":"');
          if (at < 0) continue;
          events++;
          latencies.push(now - Date.parse(frame.slice(at + 14, at + 38)));
        }
      });
    })
    .on('error', () => failed++);
}

// Latency is recorded on the first 20 connections (enough samples; the others are read and dropped, as a
// real consumer would do with them, so the server writes to all N).
for (let i = 0; i < n; i++) connect(i < 20);

function report(): void {
  latencies.sort((a, b) => a - b);
  const q = (p: number) => (latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] : NaN);
  process.stdout.write(
    `${JSON.stringify({ connected, failed, events, p50: q(0.5), p90: q(0.9), p99: q(0.99), max: latencies[latencies.length - 1] ?? NaN })}\n`,
  );
  process.exit(0);
}
process.on('SIGTERM', report);
process.stdin.on('end', report);
process.stdin.resume();
