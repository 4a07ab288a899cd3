// Owns pingd's face for people as one Fastify resource: the templates (@fastify/view with Eta, which escapes
// everything it prints), the hashed static files (asset-manifest.ts, from memory), the security headers and
// the compression (compression.ts) every page gets, and the pages (pages.ts) and the GET ping form
// (ping-form.ts). All of it lives in its own encapsulated context: the hooks below never run on the polled
// documents, /stream or the XML-RPC endpoint.
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Type, type Static } from '@sinclair/typebox';
import view from '@fastify/view';
import { Eta } from 'eta';
import { AssetManifest } from './asset-manifest.js';
import { codingFor, compressReply, matchesIfNoneMatch, varyByEncoding } from './compression.js';
import { DESCRIPTION, pageRoutes } from './pages.js';
import { pingFormRoutes } from './ping-form.js';
import { RecentRefusals } from './recent-refusals.js';
import { normalizeUrl } from '../intake/ping/validate.js';

const here = dirname(fileURLToPath(import.meta.url));
/** Templates and our own assets ship as files beside the code (src/web in a checkout; the image copies them). */
const SOURCE = join(here, '..', '..', 'src', 'web');

/**
 * What a browser may do on our pages: scripts and styles from this origin only (no inline script, no
 * CDN: many installs have no outbound access), data from this origin (the stats API and the stream), no
 * framing, forms only to us.
 */
export const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/**
 * The URL a refusal is remembered under: as the page looks it up (normalised), also for a ping refused
 * before validation (a blocked client, the rate limit), whose URL is still as sent.
 */
function lookupKey(url: string): string {
  try {
    return normalizeUrl(url);
  } catch {
    return url;
  }
}

const AssetParams = Type.Object({ file: Type.String({ maxLength: 128 }) });

async function webPlugin(app: FastifyInstance): Promise<void> {
  const assets = new AssetManifest([
    { name: 'site.css', path: join(SOURCE, 'assets', 'site.css') },
    { name: 'status.js', path: join(SOURCE, 'assets', 'status.js') },
    // uPlot's browser build, copied from its npm package (`npm run vendor`; a test checks the copy is the
    // installed version's): files for browsers, not a module Node loads, so the image needs no package.
    { name: 'uPlot.min.css', path: join(SOURCE, 'assets', 'vendor', 'uPlot.min.css') },
    { name: 'uPlot.iife.min.js', path: join(SOURCE, 'assets', 'vendor', 'uPlot.iife.min.js') },
  ]);
  const refusals = new RecentRefusals();
  app.pings.onOutcome((method, r, url) => {
    if (!r.ok && url) refusals.add(lookupKey(url), { at: Date.now(), method, reason: r.reason });
  });

  await app.register(async (web) => {
    await web.register(view, {
      engine: { eta: new Eta() },
      root: join(SOURCE, 'views'),
      layout: 'layout.eta',
      viewExt: 'eta',
      // Templates are part of the release: compiled once, never re-read.
      production: true,
      // Every page says what it is to search engines; a page without its own says what pingd is.
      defaultContext: { asset: (name: string) => assets.url(name), description: DESCRIPTION.home },
    });
    web.addHook('onSend', async (_req, reply) => {
      reply.header('content-security-policy', CSP);
      reply.header('x-content-type-options', 'nosniff');
      reply.header('referrer-policy', 'same-origin');
    });
    web.addHook('onSend', compressReply);

    web.get<{ Params: Static<typeof AssetParams> }>('/assets/:file', { schema: { params: AssetParams } }, async (req, reply) => {
      const a = assets.find(req.params.file);
      if (!a)
        return reply
          .code(404)
          .header('cache-control', 'no-store')
          .type('text/plain; charset=utf-8')
          .send(`No asset ${req.params.file} (pages name their assets with the hash of their bytes).\n`);
      const coding = codingFor(req);
      const etag = a.etag(coding);
      varyByEncoding(reply);
      // The name changes with the bytes: a year's caching, never revalidated.
      reply.header('cache-control', 'public, max-age=31536000, immutable').header('etag', etag).type(a.type);
      if (matchesIfNoneMatch(req.headers['if-none-match'], etag)) return reply.code(304).send();
      if (coding !== 'identity') reply.header('content-encoding', coding);
      return reply.send(await a.body(coding));
    });
    await pingFormRoutes(web);
    await pageRoutes(web, { refusals });
  });
}

export default fp(webPlugin, { name: 'web', dependencies: ['pings', 'stats', 'publishing', 'verification'] });
