// Owns the type of the npm `pubsubhubbub` subscriber (1.0.2 ships none): only what the tests call.
declare module 'pubsubhubbub' {
  import type { EventEmitter } from 'node:events';
  import type { IncomingMessage, ServerResponse } from 'node:http';
  interface Subscriber extends EventEmitter {
    subscribe(topic: string, hub: string, callback: (err: Error | null, topic?: string) => void): void;
    listener(): (req: IncomingMessage, res: ServerResponse) => void;
  }
  const pubsubhubbub: { createServer(options: { callbackUrl: string; secret?: string; leaseSeconds?: number }): Subscriber };
  export default pubsubhubbub;
}
