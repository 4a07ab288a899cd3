// Owns the cryptography of publisher-side authentication (RSS Ping, "Publisher-side authentication"):
// publisher passwords sealed at rest, the one-time endpoint digests, tokens and generated passwords.
//
// Why passwords are encrypted, not hashed: the publisher proves itself by POSTing to
// sha1(site_uri + password + token), so the server must compute that digest, which needs the password
// itself (any stored value that lets us compute it is password-equivalent). A one-way KDF hash would
// make RSS Ping's scheme impossible. The password is therefore sealed with AES-256-GCM under a key
// derived from RSSPING_SECRET, which lives in the environment and never in the database: a leaked
// database or backup alone reveals no password. Passwords are generated (144 random bits) by default so
// no reused human password is ever at stake.
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import { PingdError } from '../../platform/errors.js';

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class SecretBoxError extends PingdError<'RSSPING_SECRET_MISMATCH'> {
  constructor(message: string, options?: { cause?: unknown }) {
    super('RSSPING_SECRET_MISMATCH', message, options);
  }
}

/** The 256-bit sealing key derived from RSSPING_SECRET. */
export function deriveKey(secret: string): Buffer {
  return Buffer.from(
    hkdfSync('sha256', Buffer.from(secret, 'utf8'), Buffer.from('pingd rss-ping'), Buffer.from('publisher password v1'), 32),
  );
}

/** Seals a password; the site URL is bound in as associated data so sealed values cannot be swapped between rows. */
export function sealPassword(key: Buffer, siteUrl: string, password: string): Buffer {
  const iv = randomBytes(IV_BYTES);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(Buffer.from(siteUrl, 'utf8'));
  const ct = Buffer.concat([c.update(password, 'utf8'), c.final()]);
  return Buffer.concat([Buffer.from([VERSION]), iv, c.getAuthTag(), ct]);
}

/** Opens a sealed password; throws SecretBoxError when the key (RSSPING_SECRET) or the row does not match. */
export function openPassword(key: Buffer, siteUrl: string, sealed: Uint8Array): string {
  const b = Buffer.from(sealed);
  if (b.length < 1 + IV_BYTES + TAG_BYTES || b[0] !== VERSION) throw new SecretBoxError('the sealed password has an unknown format');
  try {
    const d = createDecipheriv('aes-256-gcm', key, b.subarray(1, 1 + IV_BYTES));
    d.setAAD(Buffer.from(siteUrl, 'utf8'));
    d.setAuthTag(b.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES));
    return Buffer.concat([d.update(b.subarray(1 + IV_BYTES + TAG_BYTES)), d.final()]).toString('utf8');
  } catch (err) {
    throw new SecretBoxError('the publisher password cannot be decrypted: RSSPING_SECRET is not the one it was stored with', {
      cause: err,
    });
  }
}

/** A generated password: 18 random bytes, base64url (24 characters, no padding). */
export function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}

/** A single-use token: the issue time (RSS Ping calls the token "datetime") and 128 random bits. */
export function newToken(now = new Date()): string {
  const stamp = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}Z$/, 'Z');
  return `${stamp}-${randomBytes(16).toString('hex')}`;
}

/** The one-time endpoints: lower-case hex SHA1 (and MD5, which RSS Ping also allows) of site_uri + password + token. */
export function endpointDigests(siteUri: string, password: string, token: string): { sha1: string; md5: string } {
  const input = Buffer.from(siteUri + password + token, 'utf8');
  return { sha1: createHash('sha1').update(input).digest('hex'), md5: createHash('md5').update(input).digest('hex') };
}
