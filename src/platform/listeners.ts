// Owns telling subscribers of an event: a typed list whose emit calls every listener in turn and logs what
// one throws instead of passing it on, so a subscriber's bug (metrics, stats, a push channel) never turns
// the work that raised the event, such as a ping already committed, into an error reply.

/** Where a listener's throw is written (the app's logger). */
export interface ListenerLog {
  error(obj: object, msg?: string): void;
}

export class Listeners<A extends unknown[]> {
  private readonly fns: ((...args: A) => void)[] = [];

  /** `event` names the list in the log line of a listener that threw. */
  constructor(
    private readonly event: string,
    private readonly log: ListenerLog,
  ) {}

  add(fn: (...args: A) => void): void {
    this.fns.push(fn);
  }

  /** Calls every listener with `args`; one that throws is logged and the next is still called. */
  emit(...args: A): void {
    for (const fn of this.fns) {
      try {
        fn(...args);
      } catch (err) {
        this.log.error({ err: { message: (err as Error)?.message ?? String(err) }, event: this.event }, 'listener failed');
      }
    }
  }
}
