// Owns the admin socket, `pingd.sock` in DATA_DIR: a Unix socket where the running server takes the
// operator's requests (the command line's commands) without a token. Its mode is 0600, so only the
// server's own user (and root) can connect: the file's permissions are the authorization. A plain
// node:http server that hands each request to the app's router, marked as the operator's.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { chmodSync, lstatSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { trustAsAdmin } from '../../platform/admin-auth.js';

export const ADMIN_SOCKET = 'pingd.sock';

export function adminSocketPath(dataDir: string): string {
  return join(dataDir, ADMIN_SOCKET);
}

/** sun_path holds 108 bytes on Linux, 104 on macOS (with the terminating NUL); a longer path cannot be bound. */
const MAX_PATH_BYTES = 103;

export interface AdminSocket {
  readonly path: string;
  /** Stops taking connections; requests already in progress finish. */
  stop(): void;
  /** Stops, ends every connection left and removes the socket file. */
  close(): Promise<void>;
}

function inode(path: string): number | undefined {
  try {
    return lstatSync(path).ino;
  } catch {
    return undefined;
  }
}

/**
 * Listens on `path` and hands every request to `route` (Fastify's `app.routing`). A socket file already
 * there is one a crashed server left (the caller holds the data directory's lock, so no live server
 * answers on it): it is replaced. Synchronous up to the bind, with a umask that leaves the file no
 * permissions beyond its owner's from the start: the socket exists when this returns.
 */
export function listenAdminSocket(
  path: string,
  route: (req: IncomingMessage, res: ServerResponse) => void,
  opts: { requestTimeout: number; headersTimeout: number; onError(err: Error): void },
): AdminSocket {
  if (Buffer.byteLength(path) > MAX_PATH_BYTES)
    throw new Error(`the socket path ${path} is longer than ${MAX_PATH_BYTES} bytes; use a shorter DATA_DIR`);
  try {
    if (!lstatSync(path).isSocket()) throw new Error(`${path} exists and is not a socket; remove it`);
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const server = http.createServer({ requestTimeout: opts.requestTimeout, headersTimeout: opts.headersTimeout }, (req, res) => {
    trustAsAdmin(req);
    route(req, res);
  });
  server.on('error', opts.onError);
  const umask = process.umask(0o177);
  try {
    // A pipe is bound inside listen() itself (Node emits 'listening' on the next tick).
    server.listen(path);
  } finally {
    process.umask(umask);
  }
  try {
    chmodSync(path, 0o600);
  } catch (err) {
    server.close();
    throw err;
  }
  const ours = inode(path);
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    server.close();
    server.closeIdleConnections();
  };
  return {
    path,
    stop,
    async close() {
      stop();
      server.closeAllConnections();
      // Closing the server removes the file; a crash does not (the next start replaces it).
      if (ours !== undefined && inode(path) === ours) {
        try {
          unlinkSync(path);
        } catch {
          /* already gone */
        }
      }
    },
  };
}
