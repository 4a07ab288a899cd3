// Owns the benchmark's baseline: the smallest Fastify app that reads the same requests pingd reads and
// answers fixed bytes, run in its own process. Its requests/s is this machine's HTTP-stack limit, against
// which every pingd figure is given as a ratio. The bench sets the fixed answer before each
// scenario through PUT /__bench/answer, so a 2 MB gzip document is compared with 2 MB of fixed bytes.
import Fastify from 'fastify';

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

let answer: Answer = {
  status: 200,
  headers: { 'content-type': 'text/xml; charset=utf-8' },
  body: Buffer.from('<?xml version="1.0"?>\n<methodResponse/>\n'),
};

const app = Fastify({ logger: false, bodyLimit: 64 * 1024 * 1024 });
// Same body handling as pingd's XML-RPC endpoint: every content type read whole as bytes.
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

app.put('/__bench/answer', async (req) => {
  const a = JSON.parse((req.body as Buffer).toString('utf8')) as { status: number; headers: Record<string, string>; bodyBase64: string };
  answer = { status: a.status, headers: a.headers, body: Buffer.from(a.bodyBase64, 'base64') };
  return 'ok\n';
});

const fixed = async (_req: unknown, reply: import('fastify').FastifyReply) => {
  reply.code(answer.status).headers(answer.headers);
  return reply.send(answer.status === 304 ? undefined : answer.body);
};
app.get('/*', fixed);
app.post('/*', fixed);

const port = Number(process.env.PORT ?? 0);
await app.listen({ port, host: '127.0.0.1' });
const addr = app.server.address();
// The parent reads the port from this line.
console.log(`LISTENING ${typeof addr === 'object' && addr ? addr.port : port}`);
const stop = () => void app.close().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
