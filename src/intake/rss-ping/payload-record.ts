// Owns what of an accepted rss_ping is stored beside its ping: the record payload-repository.ts inserts,
// made from the parsed document, the admitted ping, its feeds and the item read from its payload, every
// free-text field stripped of control characters and cut to its column's bound.
import { createHash } from 'node:crypto';
import { stripControls } from '../../platform/xml/escape.js';
import type { ValidPing } from '../ping/validate.js';
import { canonicalFeedType, type RssPingDocument } from './parse.js';
import type { PayloadItem } from './payload.js';
import type { PayloadRecord } from './payload-repository.js';
import type { Auth } from './auth.js';

const clip = (s: string | null | undefined, max = 2048) => (s == null ? null : stripControls(s).slice(0, max));

/** `feedUrls`: the document's feed_uris, normalised, in its order. */
export function payloadRecord(doc: RssPingDocument, ping: ValidPing, feedUrls: string[], item: PayloadItem, auth: Auth): PayloadRecord {
  return {
    siteName: ping.name,
    feeds: doc.feeds.map((f, i) => ({ uri: feedUrls[i], type: clip(canonicalFeedType(f.type) ?? f.type, 100) })),
    auth: auth.level,
    authNote: clip(auth.note, 500),
    payloadType: clip(doc.payload.type, 200),
    payloadEncoding: clip(doc.payload.encoding, 100),
    payloadAttributes: Object.fromEntries(Object.entries(doc.payload.attributes).map(([k, v]) => [clip(k, 200)!, clip(v)!])),
    payloadFormat: item.format,
    payload: doc.payload.text,
    payloadSha1: createHash('sha1').update(doc.payload.bytes).digest('hex'),
    payloadHash: clip(doc.payloadHash?.value, 200),
    payloadHashAlgorithm: doc.payloadHash?.algorithm ?? null,
    payloadHashUri: clip(doc.payloadHashUri?.uri),
    publisherMboxHash: clip(doc.publisherMboxHash?.value, 200),
    publisherMboxHashAlgorithm: doc.publisherMboxHash?.algorithm ?? null,
    headline: item.headline,
    itemLink: item.link,
    itemGuid: clip(item.guid),
    itemUri: clip(item.uri)!,
    summary: item.summary,
    tokenized: item.tokenized,
  };
}
