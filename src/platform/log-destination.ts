// Owns where a serving process's log lines go: stdout through an asynchronous buffer with a byte bound,
// so that a slow or stopped reader of the logs can never block the event loop (and with it timers such as
// the shutdown bound, health checks and pings). Lines that do not fit are dropped and counted.
//
// Why not pino's default: it writes synchronously, and when the reader of a pipe falls behind every line
// waits for it (on EAGAIN, sonic-boom sleeps 100 ms per attempt with the event loop held). After a flood at
// LOG_LEVEL=debug that held a SIGTERM'd process at full CPU for minutes, far past SHUTDOWN_TIMEOUT_MS.
// sonic-boom directly, not pino.destination(): that one registers an exit hook which writes the rest
// synchronously at process.exit, and against a reader that is not reading, that write never returns.
import sonicBoom from 'sonic-boom';

// The package is CommonJS with ES-style typings: under NodeNext the default import is the whole module.
const { SonicBoom } = sonicBoom;

export interface LogDestination {
  /** What pino writes to. */
  readonly stream: InstanceType<typeof SonicBoom>;
  /** Lines dropped because the buffer was full, since start. */
  dropped(): number;
  /** Writes what is buffered, waiting at most `ms`; true when everything went out in time. */
  flushWithin(ms: number): Promise<boolean>;
}

export function logDestination(opts: { fd?: number; maxBytes: number }): LogDestination {
  let dropped = 0;
  const fd = opts.fd ?? 1;
  // stdout must be non-blocking, which Node makes a pipe only once process.stdout is first touched (libuv
  // opens it as a stream). Left blocking, an asynchronous write to a pipe nobody reads parks a libuv pool
  // thread inside write(2), and process.exit then waits for that thread for ever. Measured: the compiled
  // server (`npm start`) with an unread stdout pipe was still running 8 s after SIGTERM with
  // SHUTDOWN_TIMEOUT_MS=3000, 4 runs of 4, and exited after 3.5 s with this; under tsx, whose loader
  // touches process.stdout, it always exited, which is why the tests run compiled.
  if (fd === 1) void process.stdout;
  const stream = new SonicBoom({
    fd,
    sync: false,
    // A line is handed to the kernel as soon as the previous write completes; lines that arrive meanwhile
    // are written together. 1, not 0: sonic-boom's flush() answers at once, without writing, when it is 0.
    minLength: 1,
    maxLength: opts.maxBytes,
  });
  stream.on('drop', () => void dropped++);
  // A closed stdout (EPIPE) must not crash the service: its lines have nowhere to go.
  stream.on('error', () => undefined);
  return {
    stream,
    dropped: () => dropped,
    flushWithin(ms) {
      return new Promise((resolve) => {
        // Not unref'd: the caller exits when this settles, and an emptied event loop must not beat it to
        // it with another exit code.
        const timer = setTimeout(() => resolve(false), ms);
        try {
          // Called once the buffer is written out. Its error, if any, is fsync's on a pipe (EINVAL), which
          // says nothing about the lines.
          stream.flush(() => {
            clearTimeout(timer);
            resolve(true);
          });
        } catch {
          clearTimeout(timer);
          resolve(false);
        }
      });
    },
  };
}
