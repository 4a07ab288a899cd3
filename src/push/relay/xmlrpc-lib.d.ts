// The types of the two halves of the npm `xmlrpc` client (1.3) the relay uses without its transport: the
// call's serializer and the answer's deserializer (@types/xmlrpc declares only the package's entry point).
declare module 'xmlrpc/lib/serializer.js' {
  export function serializeMethodCall(method: string, params?: unknown[], encoding?: string): string;
}

declare module 'xmlrpc/lib/deserializer.js' {
  import type { Readable } from 'node:stream';
  export default class Deserializer {
    constructor(encoding?: string);
    deserializeMethodResponse(
      stream: Readable,
      callback: (err: (Error & Record<string, unknown>) | null | undefined, value?: unknown) => void,
    ): void;
  }
}
