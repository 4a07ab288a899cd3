// Owns the operator API's routes under /api/admin/, every one behind the operator's authorization (the
// admin socket, or ADMIN_TOKEN over HTTP: platform/admin-auth.ts): POST /api/admin/cli runs a `pingd`
// command in the server, on its own database and configuration, one at a time; GET
// /api/admin/websub/subscriptions is the hub's subscriptions list, in pages.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import type { Config } from '../../platform/config.js';
import { adminOnly } from '../../platform/admin-auth.js';
import { ApiError } from '../../platform/http-schema.js';
import { inBackground } from '../../platform/db/database.js';
import { PageQuery, sendSubscriptions, SubscriptionList } from '../../push/websub/routes.js';
import { DB_COMMANDS, parseInvocation, runInvocation, type CommandContext } from './commands.js';
import { databaseLine } from '../../platform/db/which-database.js';

/** The answers' messages (tests compare them whole). */
export const ADMIN_ANSWERS = {
  serve: '`pingd serve` starts a server; it cannot run inside one. Start it as a process of its own.',
  busy: 'Another operator command is running in this server; try again when it is done.',
} as const;

/** Flags and values of one command line; the longest real one (publisher add with a password) is far below. */
const CliRequest = Type.Object({ argv: Type.Array(Type.String({ maxLength: 4096 }), { maxItems: 64 }) }, { additionalProperties: false });
const CliAnswer = Type.Object({
  /** The command's exit code, as `pingd` itself would exit (docs/reference/cli.md). */
  code: Type.Integer(),
  stdout: Type.String(),
  stderr: Type.String(),
});

/** At most one operator command at a time: they are rare, and two (a prune, a render) would compete. */
export class CommandSlot {
  private current: Promise<unknown> | null = null;

  get busy(): boolean {
    return this.current !== null;
  }

  /** Runs fn in the slot; the caller checked `busy` in the same turn. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    const p = fn();
    this.current = p;
    const clear = () => {
      if (this.current === p) this.current = null;
    };
    p.then(clear, clear);
    return p;
  }

  /** Resolves once the command running now (if any) is done. */
  async idle(): Promise<void> {
    await this.current?.catch(() => undefined);
  }
}

export interface AdminRouteOptions {
  config: Config;
  slot: CommandSlot;
  /** The server's database as a command opens it (it must not close the server's). */
  openDb: CommandContext['openDb'];
}

export async function adminRoutes(app: FastifyInstance, opts: AdminRouteOptions): Promise<void> {
  app.addHook('onRequest', adminOnly(opts.config.ADMIN_TOKEN));

  app.post<{ Body: Static<typeof CliRequest> }>(
    '/api/admin/cli',
    { schema: { body: CliRequest, response: { 200: CliAnswer, 400: ApiError, 401: ApiError, 409: ApiError } } },
    async (req, reply) => {
      const { argv } = req.body;
      reply.header('cache-control', 'no-store');
      if (argv[0] === 'serve') return reply.code(400).send({ error: 'ADMIN_COMMAND_REFUSED', message: ADMIN_ANSWERS.serve });
      if (opts.slot.busy) return reply.code(409).send({ error: 'ADMIN_BUSY', message: ADMIN_ANSWERS.busy });
      const stdout: string[] = [];
      const stderr: string[] = [];
      const io = { out: (text: string) => void stdout.push(`${text}\n`), err: (text: string) => void stderr.push(`${text}\n`) };
      // Background work: on the embedded database intake's statements go first.
      const code = await opts.slot.run(() =>
        inBackground(async () => {
          const inv = parseInvocation(argv, DB_COMMANDS, io);
          if (typeof inv === 'number') return inv;
          // The server's database, said as the command line says its own (the caller's DATA_DIR may be relative).
          const openDb: CommandContext['openDb'] = (c, purpose) => {
            io.err(databaseLine(opts.config));
            return opts.openDb(c, purpose);
          };
          return runInvocation(inv, opts.config, { ...io, openDb, inServer: true });
        }),
      );
      // The command's name only: its arguments may hold a publisher's password.
      req.log.info({ command: argv[0] ?? null, code }, 'operator command');
      return reply.send({ code, stdout: stdout.join(''), stderr: stderr.join('') });
    },
  );

  // The same pages as GET /api/websub/subscriptions (?limit=, ?after= the previous page's `next`).
  app.get<{ Querystring: Static<typeof PageQuery> }>(
    '/api/admin/websub/subscriptions',
    { schema: { querystring: PageQuery, response: { 200: SubscriptionList, 400: ApiError, 401: ApiError } } },
    async (req, reply) => sendSubscriptions(app.db, req.query, reply),
  );
}
