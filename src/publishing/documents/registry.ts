// Owns a set of live documents by path: what the renderer renders and the routes serve. The server's own
// set is publishedDocuments() (published.ts).
import type { LiveDocument } from './document.js';
import { listingReads, type ListingReads } from './listing.js';

export class DocumentRegistry {
  private readonly byPath = new Map<string, LiveDocument>();

  /**
   * @param listing which pings the weblogUpdates documents list; the hourly archives the renderer makes
   *   beside these documents list the same.
   */
  constructor(
    documents: Iterable<LiveDocument> = [],
    readonly listing: ListingReads = listingReads(),
  ) {
    for (const d of documents) this.register(d);
  }

  /** Adds a document; its name and path must be new, and the path absolute. */
  register(doc: LiveDocument): void {
    if (!doc.path.startsWith('/')) throw new Error(`document path must start with /: ${doc.path}`);
    if (this.byPath.has(doc.path) || this.list().some((d) => d.name === doc.name))
      throw new Error(`document ${doc.path} is already registered`);
    this.byPath.set(doc.path, doc);
  }

  list(): LiveDocument[] {
    return [...this.byPath.values()];
  }

  get(path: string): LiveDocument | undefined {
    return this.byPath.get(path);
  }
}
