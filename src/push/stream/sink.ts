// Owns one stream connection's outgoing bytes: writes without waiting (live events are never held back for
// one slow reader), a bound on what may wait unsent in this process (beyond it a live connection falls
// back to catching up from the database instead of growing the process), the count of bytes the client
// has taken (the slow-consumer rule's read rate), and ending or cutting the response.
import type { ServerResponse } from 'node:http';

/** Where a connection's bytes go. */
export interface Sink {
  /**
   * Queues text for the client. Unpaced (live): false when STREAM_BUFFER_BYTES already wait for it (nothing
   * is queued; the connection falls back to catching up). Paced (a replay, which waits for drained() before
   * its next write; control frames): always queued while open. False when closed.
   */
  write(text: string | Buffer, paced?: boolean): boolean;
  /** Resolves once the client has taken what was queued (replay waits for slow readers, live does not). */
  drained(): Promise<void>;
  /** Bytes queued in this process and not yet taken by the client's socket. */
  readonly waiting: number;
  /** Bytes the client's socket has taken so far. */
  readonly delivered: number;
  /** Ends the response (a replay-only stream at its end). */
  end(): void;
  /** Ends the connection: a consumer cut off as too slow. */
  cut(): void;
  readonly closed: boolean;
}

export class ResponseSink implements Sink {
  private done = false;
  private written = 0;

  constructor(
    private readonly raw: ServerResponse,
    /** STREAM_BUFFER_BYTES: the most that may wait in this process for one live client. */
    private readonly limit: number,
  ) {
    raw.once('close', () => {
      this.done = true;
    });
  }

  get closed(): boolean {
    return this.done || this.raw.destroyed || this.raw.writableEnded;
  }

  get waiting(): number {
    return this.raw.writableLength;
  }

  get delivered(): number {
    return this.written - this.raw.writableLength;
  }

  write(text: string | Buffer, paced = false): boolean {
    if (this.closed) return false;
    const bytes = typeof text === 'string' ? Buffer.byteLength(text) : text.length;
    // One batch larger than the bound still goes to a client that has nothing waiting.
    const waiting = this.raw.writableLength;
    if (!paced && waiting > 0 && waiting + bytes > this.limit) return false;
    this.written += bytes;
    this.raw.write(text);
    return true;
  }

  drained(): Promise<void> {
    if (this.closed || !this.raw.writableNeedDrain) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.raw.off('drain', done);
        this.raw.off('close', done);
        resolve();
      };
      this.raw.on('drain', done);
      this.raw.on('close', done);
    });
  }

  /** Ends the response (a replay-only stream done, shutdown): an EventSource reconnects with Last-Event-ID. */
  end(): void {
    if (this.closed) return;
    this.done = true;
    this.raw.end();
  }

  /** Drops the connection and what waits for it (a consumer that stopped reading): its memory is released. */
  cut(): void {
    if (this.closed) return;
    this.done = true;
    this.raw.destroy();
  }
}
