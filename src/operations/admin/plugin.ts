// Owns the operator API as a Fastify resource: its routes (routes.ts: `pingd` commands run in the server,
// the subscriptions list) and, with the embedded database, the admin socket pingd.sock in DATA_DIR
// (socket.ts), opened when the server listens and removed on close, after the command running then.
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../platform/config.js';
import { openDatabase } from '../../platform/db/database.js';
import { borrowed } from '../../platform/db/borrow.js';
import { MIGRATION_TIMEOUT_MS } from '../../platform/db/migrate.js';
import { adminRoutes, CommandSlot } from './routes.js';
import { adminSocketPath, listenAdminSocket, type AdminSocket } from './socket.js';

async function adminPlugin(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  const { config } = opts;
  const slot = new CommandSlot();
  await app.register(adminRoutes, {
    config,
    slot,
    // The server's own database, which a command's close() leaves open. Migrations on PostgreSQL get a
    // connection of their own without the statement timeout, as at start (platform/db/plugin.ts).
    openDb: async (c, purpose) =>
      purpose === 'migrate' && c.DATABASE_URL
        ? openDatabase({ databaseUrl: c.DATABASE_URL, dataDir: c.DATA_DIR, poolMax: 1, timeoutMs: MIGRATION_TIMEOUT_MS })
        : borrowed(app.db),
  });

  // The socket is for the command line, which reaches a server only on the embedded database: on
  // PostgreSQL it connects to the database itself (processes share it), and DATA_DIR means nothing there.
  if (config.DATABASE_URL) {
    app.addHook('onClose', () => slot.idle());
    return;
  }
  let socket: AdminSocket | undefined;
  // Synchronous (a callback hook): the socket is bound before listen() resolves to its caller.
  app.addHook('onListen', (done) => {
    try {
      socket = listenAdminSocket(adminSocketPath(config.DATA_DIR), (req, res) => app.routing(req, res), {
        requestTimeout: config.REQUEST_TIMEOUT_MS,
        headersTimeout: Math.min(60_000, config.REQUEST_TIMEOUT_MS),
        onError: (err) =>
          app.log.warn(
            { err: { message: err.message } },
            'admin socket failed; commands reach this server over HTTP with ADMIN_TOKEN only',
          ),
      });
    } catch (err) {
      // The server serves without it: commands then need ADMIN_TOKEN, or the server stopped.
      app.log.warn(
        { err: { message: (err as Error).message } },
        'admin socket not opened; commands reach this server over HTTP with ADMIN_TOKEN only',
      );
    }
    done();
  });
  app.addHook('preClose', async () => {
    socket?.stop();
  });
  // Before the database closes (onClose runs in reverse order of registration): the command finishes first.
  app.addHook('onClose', async () => {
    await slot.idle();
    await socket?.close();
  });
}

export default fp(adminPlugin, { name: 'admin', dependencies: ['db'] });
