// Owns the signature of authenticated content distribution (WebSub §8): the X-Hub-Signature header, an
// HMAC of the exact body bytes keyed with the subscriber's hub.secret. Of the methods §8 lists (sha1,
// sha256, sha384, sha512) sha256: sha1 is deprecated, and the header names the method, so a subscriber
// knows which one to check.
import { createHmac } from 'node:crypto';

export function signature(secret: string, body: Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}
