// Owns reading fetched documents off the event loop for verification: document-task.ts on a pool of
// worker threads (budget-pool.ts), each document under VERIFY_PARSE_BUDGET_MS and VERIFY_PARSE_MEMORY_MB.
// A document over either is `too_complex`; a pool with every thread busy and its waiting list full says
// `busy` (the job comes back shortly, like a host that is busy).
import { BudgetPool, moduleBeside } from '../platform/work/budget-pool.js';
import type { DocumentResult, DocumentTask } from './document-task.js';
import type { OwnEndpoints } from './names-pingd.js';

export type ReadResult = DocumentResult | { kind: 'too_complex'; reason: 'time' | 'memory' } | { kind: 'busy' };

export interface DocumentReaderOptions {
  threads: number;
  budgetMs: number;
  memoryMb: number;
  /** Verifications that may wait for a thread (VERIFY_CONCURRENCY: each holds one document at most). */
  maxWaiting: number;
  /** A reading thread failed outside any document (it could not start). */
  onError?: (err: Error) => void;
  /** This server's hub and cloud (ownEndpoints(PUBLIC_URL)): every feed read says whether it names them. */
  own?: OwnEndpoints | null;
}

export class DocumentReader {
  private readonly pool: BudgetPool<DocumentTask, DocumentResult>;
  private readonly own: OwnEndpoints | null;

  constructor(opts: DocumentReaderOptions) {
    this.own = opts.own ?? null;
    this.pool = new BudgetPool({
      filename: moduleBeside(import.meta.url, 'document-task'),
      threads: opts.threads,
      budgetMs: opts.budgetMs,
      maxWaiting: opts.maxWaiting,
      memoryMb: opts.memoryMb,
      onError: opts.onError,
    });
  }

  /** Documents being read and waiting for a thread now. */
  get load(): { running: number; waiting: number } {
    return this.pool.load;
  }

  get overBudget(): { time: number; memory: number } {
    return this.pool.overBudget;
  }

  async read(task: DocumentTask): Promise<ReadResult> {
    const r = await this.pool.run(task.kind === 'feed' ? { ...task, own: this.own } : task);
    if (r.kind === 'ok') return r.value;
    if (r.kind === 'over_budget') return { kind: 'too_complex', reason: r.reason };
    return r;
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
