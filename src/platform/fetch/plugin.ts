// Owns the outbound HTTP client as a Fastify resource (`app.fetcher`): one SafeFetcher configured from
// FETCH_* (address policy, deadline, User-Agent), with a counter of outcomes. Modules that fetch from
// other hosts (RSS Ping's payload_hash_uri, …) use it instead of http.request or fetch().
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Counter } from 'prom-client';
import { SafeFetcher } from './safe-fetch.js';
import { userAgent } from './user-agent.js';
import type { Config } from '../config.js';

declare module 'fastify' {
  interface FastifyInstance {
    fetcher: SafeFetcher;
  }
}

async function fetchPlugin(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  const { config } = opts;
  const outcomes = new Counter({
    name: 'pingd_fetch_total',
    help: 'Outbound HTTP fetches, by outcome (ok, or the FetchError code).',
    labelNames: ['outcome'] as const,
    registers: [app.metrics],
  });
  if (config.FETCH_ALLOW_PRIVATE) app.log.warn('FETCH_ALLOW_PRIVATE=true: outbound requests may reach loopback, private and metadata addresses');
  app.decorate(
    'fetcher',
    new SafeFetcher({
      policy: { allowPrivate: config.FETCH_ALLOW_PRIVATE, allow: config.FETCH_ALLOW_ADDRESSES },
      timeoutMs: config.FETCH_TIMEOUT_MS,
      userAgent: userAgent(config.FETCH_CONTACT_URL),
      onOutcome: (o) => outcomes.inc({ outcome: o }),
    }),
  );
}

export default fp(fetchPlugin, { name: 'fetch', dependencies: ['metrics'] });
