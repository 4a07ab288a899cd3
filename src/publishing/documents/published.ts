// Owns the list of live documents pingd publishes. The server routes and renders exactly these, and so
// does `pingd render`: a new document is one line here.
import { changesDocuments } from './changes.js';
import { DocumentRegistry } from './registry.js';
import { updatesDocument } from './updates.js';
import { listingReads, type Listing } from './listing.js';

/**
 * Every live document this server publishes; `listing` (from VERIFY_PINGS) decides which pings they list,
 * `base` (PUBLIC_URL) is where their links point.
 */
export function publishedDocuments(listing: Listing = 'all', base?: string): DocumentRegistry {
  const reads = listingReads(listing);
  return new DocumentRegistry([...changesDocuments(reads), updatesDocument(base)], reads);
}
