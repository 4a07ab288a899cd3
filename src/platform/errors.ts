// Owns pingd's error codes: every error the service raises on purpose carries an UPPER_SNAKE code and
// the HTTP status it is answered with, both from the one table below, so that no handler keeps a mapping
// of its own. (Refusals of a ping are outcomes, not errors: their statuses are in intake/ping/refusals.ts.)

export const ERROR_STATUS = {
  // Start-up and configuration
  CONFIG_INVALID: 500,
  BLOCKLIST_UNREADABLE: 500,
  // The database
  DB_UNAVAILABLE: 503,
  DB_LOCKED: 503,
  DB_QUERY_FAILED: 503,
  DISK_FULL: 503, // the database's disk is full: writes are refused until space is freed
  READY_TIMEOUT: 503,
  // Intake
  PING_INVALID: 400,
  STORAGE_UNAVAILABLE: 503,
  CHARSET_UNSUPPORTED: 400,
  XMLRPC_FAULT: 200, // XML-RPC answers every fault with HTTP 200 (the fault is in the body)
  RSSPING_INVALID: 400,
  RSSPING_SECRET_MISMATCH: 503,
  // Publishing
  PUBLISH_STORE_FAILED: 503,
  PUBLISH_RENDER_FAILED: 500,
  // Outbound requests (the status a client of ours would see if we passed the failure on)
  FETCH_URL_INVALID: 400,
  FETCH_ADDRESS_BLOCKED: 403,
  FETCH_DNS_FAILED: 502,
  FETCH_TIMEOUT: 504,
  FETCH_TOO_LARGE: 502,
  FETCH_TOO_MANY_REDIRECTS: 502,
  FETCH_NETWORK: 502,
  FETCH_BAD_RESPONSE: 502,
  FETCH_BUSY: 503,
  // The operator API (socket or ADMIN_TOKEN)
  ADMIN_UNAUTHORIZED: 401,
  ADMIN_COMMAND_REFUSED: 400,
  ADMIN_BUSY: 409,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** The base of every error pingd raises on purpose: a code from ERROR_STATUS and its HTTP status. */
export class PingdError<C extends ErrorCode = ErrorCode> extends Error {
  readonly statusCode: number;

  constructor(
    readonly code: C,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.statusCode = ERROR_STATUS[code];
  }
}

/**
 * Runs one piece of database work and wraps its failure with what was being done, one way for every
 * repository: `DB_QUERY_FAILED: <what>: <driver message>`, the driver's error kept as the cause.
 */
export async function withContext<T>(
  what: string,
  fn: () => Promise<T>,
  code: 'DB_QUERY_FAILED' | 'PUBLISH_STORE_FAILED' = 'DB_QUERY_FAILED',
): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw new PingdError(code, `${what}: ${(err as Error).message}`, { cause: err });
  }
}
