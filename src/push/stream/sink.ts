// Owns one stream connection's outgoing bytes: writes without waiting (live events are never held back for
// one slow reader), a bound on what may wait unsent in this process, and cutting off a consumer that falls
// beyond it so its memory is released instead of growing the process.
import type { ServerResponse } from 'node:http';
import type { Sink } from './hub.js';

export class ResponseSink implements Sink {
  private done = false;

  constructor(
    private readonly raw: ServerResponse,
    /** STREAM_BUFFER_BYTES: the most that may wait in this process for one client. */
    private readonly limit: number,
    private readonly onOverflow: () => void,
  ) {
    raw.once('close', () => {
      this.done = true;
    });
  }

  get closed(): boolean {
    return this.done || this.raw.destroyed || this.raw.writableEnded;
  }

  write(text: string): boolean {
    if (this.closed) return false;
    // One batch larger than the bound still goes to a client that has nothing waiting.
    const waiting = this.raw.writableLength;
    if (waiting > 0 && waiting + Buffer.byteLength(text) > this.limit) {
      // The client stopped reading (or reads slower than events arrive): disconnect it. It resumes with
      // Last-Event-ID and gets what it missed from the database, at its own pace.
      this.done = true;
      this.onOverflow();
      this.raw.destroy();
      return false;
    }
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

  /** Ends the response (shutdown): the client reconnects, elsewhere or later, with Last-Event-ID. */
  end(): void {
    if (this.closed) return;
    this.done = true;
    this.raw.end();
  }
}
