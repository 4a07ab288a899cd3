// Owns the list of live documents pingd publishes. The server routes and renders exactly these, and so
// does `pingd render`: a new document is one line in publishedDocuments().
import type { LiveDocument } from './document.js';
import { changesDocument, shortChangesDocument } from './changes.js';
import { updatesDocument } from './updates.js';

export class DocumentRegistry {
  private readonly byPath = new Map<string, LiveDocument>();

  constructor(documents: Iterable<LiveDocument> = []) {
    for (const d of documents) this.register(d);
  }

  /** Adds a document; its name and path must be new, and the path absolute. */
  register(doc: LiveDocument): void {
    if (!doc.path.startsWith('/')) throw new Error(`document path must start with /: ${doc.path}`);
    if (this.byPath.has(doc.path) || this.list().some((d) => d.name === doc.name)) throw new Error(`document ${doc.path} is already registered`);
    this.byPath.set(doc.path, doc);
  }

  list(): LiveDocument[] {
    return [...this.byPath.values()];
  }

  get(path: string): LiveDocument | undefined {
    return this.byPath.get(path);
  }
}

/** Every live document this server publishes. */
export function publishedDocuments(): DocumentRegistry {
  return new DocumentRegistry([changesDocument(), shortChangesDocument(), updatesDocument()]);
}
