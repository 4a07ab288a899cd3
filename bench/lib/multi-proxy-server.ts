// Owns the multi-instance bench's load balancer process: a TCP proxy that hands each new client connection
// to the next backend in turn (round robin by connection, as a plain L4 balancer does; HTTP keep-alive keeps
// a client's requests on one instance). It prints `{"port":N}` once listening, and answers SIGUSR2 with the
// connections it handed to each backend (a JSON line on stderr). Started by multi-proxy.ts's startProxy.
//
//   node bench/lib/multi-proxy-server.ts HOST BACKEND_PORT[,BACKEND_PORT…]   (under tsx)
import { createConnection, createServer, type Socket } from 'node:net';

function serve(host: string, backends: number[]): void {
  let next = 0;
  const handed = backends.map(() => 0);
  const server = createServer((client: Socket) => {
    const i = next++ % backends.length;
    handed[i]++;
    const upstream = createConnection({ host: '127.0.0.1', port: backends[i] });
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.listen(0, host, () => {
    const a = server.address();
    process.stdout.write(`${JSON.stringify({ port: typeof a === 'object' && a ? a.port : 0 })}\n`);
  });
  process.on('SIGUSR2', () => process.stderr.write(`${JSON.stringify({ handed })}\n`));
  process.on('SIGTERM', () => process.exit(0));
}

const [host, ports] = process.argv.slice(2);
if (!host || !ports) throw new Error('usage: multi-proxy-server.ts HOST BACKEND_PORT[,BACKEND_PORT…]');
serve(host, ports.split(',').map(Number));
