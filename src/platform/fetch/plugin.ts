// Owns the outbound HTTP client as Fastify resources: `app.fetcher`, one SafeFetcher configured from FETCH_*
// (address policy, deadline, User-Agent), with a counter of outcomes, and `app.polite`, the instance's
// per-host manners (polite.ts) every request pingd makes of its own accord goes through. Modules that fetch
// from other hosts (RSS Ping's payload_hash_uri, …) use them instead of http.request or fetch().
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Counter } from 'prom-client';
import { SafeFetcher, type LookupFn } from './safe-fetch.js';
import { PoliteClient } from './polite.js';
import { userAgent } from './user-agent.js';
import type { Config } from '../config.js';
import { trimEndChar } from '../text/trim.js';

declare module 'fastify' {
  interface FastifyInstance {
    fetcher: SafeFetcher;
    polite: PoliteClient;
  }
}

async function fetchPlugin(app: FastifyInstance, opts: { config: Config; lookup?: LookupFn }): Promise<void> {
  const { config } = opts;
  const outcomes = new Counter({
    name: 'pingd_fetch_total',
    help: 'Outbound HTTP fetches, by outcome (ok, or the FetchError code).',
    labelNames: ['outcome'] as const,
    registers: [app.metrics],
  });
  // The aggregator-behaviour guide: a page a sysadmin can read before deciding to block us. The operator's
  // (FETCH_CONTACT_URL), else this server's own home page (PUBLIC_URL): package.json names no project page,
  // and the bare product token it fell back to promised a link it did not send.
  const contact = config.FETCH_CONTACT_URL ?? (config.PUBLIC_URL ? `${trimEndChar(config.PUBLIC_URL, '/')}/` : undefined);
  if (!contact && config.VERIFY_PINGS !== 'off') {
    app.log.warn(
      `outbound requests say only User-Agent: ${userAgent()}: set FETCH_CONTACT_URL (or PUBLIC_URL) to a page about this server, so the hosts it fetches from can tell who asks`,
    );
  }
  if (config.FETCH_ALLOW_PRIVATE)
    app.log.warn('FETCH_ALLOW_PRIVATE=true: outbound requests may reach loopback, private and metadata addresses');
  app.decorate(
    'fetcher',
    new SafeFetcher({
      policy: { allowPrivate: config.FETCH_ALLOW_PRIVATE, allow: config.FETCH_ALLOW_ADDRESSES },
      timeoutMs: config.FETCH_TIMEOUT_MS,
      userAgent: userAgent(contact),
      onOutcome: (o) => outcomes.inc({ outcome: o }),
      ...(opts.lookup ? { lookup: opts.lookup } : {}),
    }),
  );
  app.decorate('polite', new PoliteClient(app.db, config.FETCH_HOST_INTERVAL_MS));
  app.addHook('onClose', async () => app.fetcher.close());
}

export default fp(fetchPlugin, { name: 'fetch', dependencies: ['metrics', 'db'] });
