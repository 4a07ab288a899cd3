// Owns the command line's way into a running server: on the embedded database, whose directory one
// process holds, a command goes to the server's admin socket (POST /api/admin/cli) and comes back as the
// exit code, stdout and stderr the server's run of it produced.
import http from 'node:http';
import { existsSync } from 'node:fs';
import type { Config } from '../../platform/config.js';
import { adminSocketPath } from './socket.js';
import { EXIT } from './commands.js';

export interface RemoteRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Connecting failed this way: nothing listens there (a file a crashed server left, or none at all). */
const NO_SERVER = new Set(['ECONNREFUSED', 'ENOENT']);

/**
 * Runs `argv` in the server that holds the embedded database, if one answers on DATA_DIR/pingd.sock.
 * Undefined when the command should run here instead: PostgreSQL (the CLI connects itself), no socket,
 * or a stale one. A refusal (400, 409) comes back as the exit code the CLI would give (2, 75) with the
 * reason on stderr; a server that fails mid-way throws (the command may have run: it is not run again).
 */
export async function runOnServer(
  argv: readonly string[],
  config: Pick<Config, 'DATABASE_URL' | 'DATA_DIR'>,
): Promise<RemoteRun | undefined> {
  if (config.DATABASE_URL) return undefined;
  const socketPath = adminSocketPath(config.DATA_DIR);
  if (!existsSync(socketPath)) return undefined;
  const body = JSON.stringify({ argv });
  const answer = await new Promise<{ status: number; text: string } | undefined>((resolve, reject) => {
    const req = http.request(
      {
        socketPath,
        method: 'POST',
        path: '/api/admin/cli',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString('utf8') }));
        res.on('error', reject);
      },
    );
    // Refused before a connection: nobody listens. After one, the command may be running: never again here.
    let connected = false;
    req.on('socket', (s) => {
      if (s.connecting) s.once('connect', () => (connected = true));
      else connected = true;
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (!connected && NO_SERVER.has(err.code ?? '')) resolve(undefined);
      else
        reject(
          new Error(
            connected
              ? `the server on ${socketPath} stopped answering: ${err.message}`
              : `cannot reach the server on ${socketPath}: ${err.message}`,
          ),
        );
    });
    req.end(body);
  });
  if (answer === undefined) return undefined;
  let json: Partial<RemoteRun & { message: string }> = {};
  try {
    json = JSON.parse(answer.text);
  } catch {
    /* not JSON: reported below */
  }
  if (answer.status === 200 && typeof json.code === 'number')
    return { code: json.code, stdout: json.stdout ?? '', stderr: json.stderr ?? '' };
  const code = answer.status === 409 ? EXIT.BUSY : answer.status === 400 ? EXIT.USAGE : EXIT.FAILURE;
  const reason = typeof json.message === 'string' ? json.message : `the server answered ${answer.status}: ${answer.text.slice(0, 200)}`;
  return { code, stdout: '', stderr: `pingd ${argv[0]}: ${reason}\n` };
}
