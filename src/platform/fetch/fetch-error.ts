// Owns how an outbound request fails: FetchError and its codes, one per way pingd's client gives up (the
// address policy, DNS, the deadline, the size bound, redirects, the network, a bad answer, the in-flight bound).
import { PingdError } from '../errors.js';

export type FetchErrorCode =
  | 'FETCH_URL_INVALID'
  | 'FETCH_ADDRESS_BLOCKED'
  | 'FETCH_DNS_FAILED'
  | 'FETCH_TIMEOUT'
  | 'FETCH_TOO_LARGE'
  | 'FETCH_TOO_MANY_REDIRECTS'
  | 'FETCH_NETWORK'
  | 'FETCH_BAD_RESPONSE'
  | 'FETCH_BUSY';

export class FetchError extends PingdError<FetchErrorCode> {
  constructor(
    code: FetchErrorCode,
    message: string,
    /** The URL of the hop that failed. */
    readonly url: string,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
  }
}
