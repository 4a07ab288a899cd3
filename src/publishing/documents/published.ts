// Owns the list of live documents pingd publishes. The server routes and renders exactly these, and so
// does `pingd render`: a new document is one line here.
import { changesDocument, shortChangesDocument } from './changes.js';
import { DocumentRegistry } from './registry.js';
import { updatesDocument } from './updates.js';

/** Every live document this server publishes. */
export function publishedDocuments(): DocumentRegistry {
  return new DocumentRegistry([changesDocument(), shortChangesDocument(), updatesDocument()]);
}
