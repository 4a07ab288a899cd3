// The command line's side of the admin socket, against a stand-in server: the server's answers become the
// exit codes docs/reference/cli.md lists (409 busy → 75, 400 → 2), a stale socket means "run it here", and a server
// that dies after taking the request is a failure, never a second run.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { adminSocketPath } from '../../../src/operations/admin/socket.js';
import { runOnServer } from '../../../src/operations/admin/socket-client.js';

const dir = mkdtempSync(join(tmpdir(), 'pingd-sock-'));
const config = { DATABASE_URL: undefined, DATA_DIR: dir };
after(() => rmSync(dir, { recursive: true, force: true }));

async function standIn(answer: (req: http.IncomingMessage, body: string, res: http.ServerResponse) => void): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => answer(req, body, res));
  });
  await new Promise<void>((r) => server.listen(adminSocketPath(dir), r));
  return server;
}
const close = (s: http.Server) => new Promise<void>((r) => s.close(() => r()));
const json = (res: http.ServerResponse, status: number, body: unknown) =>
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));

test("the answer of POST /api/admin/cli becomes the exit code and output; refusals keep the CLI's codes", async () => {
  let seen: unknown;
  const s = await standIn((req, body, res) => {
    seen = { method: req.method, url: req.url, body: JSON.parse(body) };
    const argv = JSON.parse(body).argv as string[];
    if (argv[0] === 'busy')
      return json(res, 409, {
        error: 'ADMIN_BUSY',
        message: 'Another operator command is running in this server; try again when it is done.',
      });
    if (argv[0] === 'serve') return json(res, 400, { error: 'ADMIN_COMMAND_REFUSED', message: 'no' });
    return json(res, 200, { code: 3, stdout: 'out\n', stderr: 'err\n' });
  });
  try {
    assert.deepEqual(await runOnServer(['stats', '--json'], config), { code: 3, stdout: 'out\n', stderr: 'err\n' });
    assert.deepEqual(seen, { method: 'POST', url: '/api/admin/cli', body: { argv: ['stats', '--json'] } });
    assert.deepEqual(await runOnServer(['busy'], config), {
      code: 75,
      stdout: '',
      stderr: 'pingd busy: Another operator command is running in this server; try again when it is done.\n',
    });
    assert.deepEqual(await runOnServer(['serve'], config), { code: 2, stdout: '', stderr: 'pingd serve: no\n' });
    assert.equal(
      await runOnServer(['stats'], { ...config, DATABASE_URL: 'postgres://u@127.0.0.1:1/db' }),
      undefined,
      'on PostgreSQL the CLI connects itself',
    );
  } finally {
    await close(s);
  }
  assert.equal(await runOnServer(['stats'], config), undefined, 'no socket: run it here');
});

test('a server that takes the request and dies is a failure (the command may have run), not a second run', async () => {
  const s = await standIn((req) => req.socket.destroy());
  try {
    await assert.rejects(
      runOnServer(['prune'], config),
      /^Error: the server on .*pingd\.sock stopped answering: (socket hang up|write EPIPE|read ECONNRESET)$/,
    );
  } finally {
    await close(s);
  }
});
