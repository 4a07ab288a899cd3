// A feed server in a process of its own, for tests that measure when requests arrive: in the test's own
// process the embedded database runs on the event loop and would delay the server's clock readings.
// Usage: node timing-server.mjs <host> <delayMs> <feed file>; prints its port; GET /__log returns the
// arrival times (ms) and the most requests seen in flight at once.
import http from 'node:http';
import { readFileSync } from 'node:fs';

const [host, delayArg, file] = process.argv.slice(2);
const feed = readFileSync(file);
const arrivals = [];
let inFlight = 0;
let maxInFlight = 0;
const server = http.createServer((req, res) => {
  if (req.url === '/__log') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ arrivals, maxInFlight }));
    return;
  }
  arrivals.push({ path: req.url, at: performance.timeOrigin + performance.now() });
  inFlight++;
  maxInFlight = Math.max(maxInFlight, inFlight);
  res.on('close', () => inFlight--);
  setTimeout(() => {
    res.writeHead(200, { 'content-type': 'application/rss+xml' });
    res.end(feed);
  }, Number(delayArg));
});
server.listen(0, host, () => console.log(server.address().port));
