// Property-based fuzzing of every parser and entry point: thousands of generated and mutated requests
// (fixed seed, FUZZ_SEED / FUZZ_RUNS to change), asserting no crash, no 5xx, no unhandled rejection, a
// fault or 4xx with a reason, nothing acknowledged that was not stored, stored text valid, and a valid
// ping still answered afterwards. Counterexamples worth keeping go to test/fixtures/hostile.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import zlib from 'node:zlib';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { XMLValidator } from 'fast-xml-parser';
import { startApp, methodCall, readReply, uniqueUrl, type TestApp } from '../helpers/app.js';
import { parseMethodCall, parseMethodCallText, XmlRpcFault, FAULT } from '../../src/intake/xmlrpc/parse.js';
import { fastParseMethodCall } from '../../src/intake/xmlrpc/fast-parse.js';
import { pingFromCall } from '../../src/intake/xmlrpc/methods.js';
import { validatePing, PingValidationError } from '../../src/intake/ping/validate.js';
import { decodeXml, CharsetError } from '../../src/platform/xml/decode.js';
import { escapeXml } from '../../src/platform/xml/escape.js';
import { strictParse } from '../publishing/helpers.js';
import {
  FUZZ_SEED,
  runs,
  seedBodies,
  rssSeedBodies,
  anyRpcBody,
  anyRssBody,
  grammarCall,
  hostileString,
  hostileUrl,
  queryString,
  hostileHeaderValue,
  encodeURIComponentLoose,
} from './generators.js';
import { parseRssPing, RssPingError } from '../../src/intake/rss-ping/parse.js';
import { extractPayload } from '../../src/intake/rss-ping/payload.js';
import { countPings } from '../helpers/rows.js';

const problems: string[] = [];
const onRejection = (r: unknown) => problems.push(`unhandledRejection: ${String((r as Error)?.stack ?? r)}`);
const onException = (e: Error) => problems.push(`uncaughtException: ${e.stack}`);
process.on('unhandledRejection', onRejection);
process.on('uncaughtException', onException);

const KNOWN_FAULTS = new Set<number>([
  FAULT.PARSE_ERROR,
  FAULT.UNSUPPORTED_ENCODING,
  FAULT.INVALID_REQUEST,
  FAULT.METHOD_NOT_FOUND,
  FAULT.INVALID_PARAMS,
]);
// Characters that must never reach storage or published XML (XML 1.0 Char production, minus what we strip).
const NOT_XML_CHAR =
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const seeds = seedBodies();
const rssSeeds = rssSeedBodies();
let t: TestApp;
let acked = 0;
let startCount = 0;
const tally: Record<string, number> = {};
const count = (k: string) => (tally[k] = (tally[k] ?? 0) + 1);

// The abuse screen runs on every ping (a blocklist, a rate limit too high to refuse anything here) and
// X-Forwarded-For is trusted, so that hostile forwarded addresses reach the code that parses them.
const blockDir = mkdtempSync(join(tmpdir(), 'pingd-fuzz-'));
writeFileSync(join(blockDir, 'blocklist.txt'), 'spam.example\nurl:*casino*\nname:*viagra*\nclient:192.0.2.0/24\nhost:10.0.0.0/8\n');

before(async () => {
  // No outbound requests from tests: payload_hash_uri is not fetched. A server key, so that the publisher
  // token endpoint is live.
  t = await startApp({
    BODY_LIMIT: 65536,
    RSSPING_BODY_LIMIT: 65536,
    RSSPING_VERIFY_HASH_URI: false,
    RSSPING_SECRET: 'fuzz-secret-fuzz-secret-fuzz-secret-0123',
    TRUST_PROXY: 1,
    RATE_LIMIT_PER_IP: 1_000_000,
    BLOCKLIST_FILE: join(blockDir, 'blocklist.txt'),
    // Documents are rendered when the test says (the fuzzed pings are in them).
    RENDER_SCHEDULER: false,
  });
  startCount = await countPings(t.app.db);
});
after(async () => {
  await t.close();
  rmSync(blockDir, { recursive: true, force: true });
  process.off('unhandledRejection', onRejection);
  process.off('uncaughtException', onException);
});

test('parser: generated and mutated bodies give a method call or a known fault with a bounded reason', (ctx) => {
  const n = runs(4000);
  fc.assert(
    fc.property(anyRpcBody(seeds), (body) => {
      try {
        const call = parseMethodCall(body, 'text/xml');
        count('parse:ok');
        if (call.methodName === 'weblogUpdates.ping' || call.methodName === 'weblogUpdates.extendedPing') {
          try {
            const p = validatePing(pingFromCall(call.methodName, call.params));
            count('parse:valid-ping');
            for (const s of [p.name, p.url, p.changesUrl ?? '', p.rssUrl ?? '', ...(p.tags ?? [])]) assert.doesNotMatch(s, NOT_XML_CHAR);
          } catch (e) {
            if (!(e instanceof XmlRpcFault) && !(e instanceof PingValidationError)) throw e;
          }
        }
      } catch (e) {
        if (!(e instanceof XmlRpcFault)) throw e;
        assert.ok(KNOWN_FAULTS.has(e.faultCode), `fault ${e.faultCode}: ${e.faultString}`);
        assert.ok(e.faultString.length > 0 && e.faultString.length <= 400, `fault string of ${e.faultString.length} characters`);
        count(`parse:fault ${e.faultCode}`);
      }
    }),
    { seed: FUZZ_SEED, numRuns: n },
  );
  ctx.diagnostic(
    `${n} bodies parsed: ${JSON.stringify(Object.fromEntries(Object.entries(tally).filter(([k]) => k.startsWith('parse:'))))}`,
  );
});

test('parser: the fast path never disagrees with the full parser', (ctx) => {
  let hits = 0;
  const n = runs(3000);
  fc.assert(
    fc.property(
      fc.oneof(
        anyRpcBody(seeds),
        grammarCall.map((s) => Buffer.from(s)),
      ),
      (body) => {
        let text: string;
        try {
          text = decodeXml(body, 'text/xml');
        } catch (e) {
          if (e instanceof CharsetError) return;
          throw e;
        }
        const fast = fastParseMethodCall(text);
        if (!fast) return;
        hits++;
        assert.deepEqual(fast, parseMethodCallText(text));
      },
    ),
    { seed: FUZZ_SEED + 1, numRuns: n },
  );
  ctx.diagnostic(`${n} bodies, ${hits} taken by the fast path`);
});

test('escapeXml: any string gives well-formed XML text and attributes', () => {
  fc.assert(
    fc.property(fc.oneof(hostileString(60), fc.string({ unit: 'binary', maxLength: 60 })), (s) => {
      const x = escapeXml(s);
      assert.equal(XMLValidator.validate(`<a b="${x}" c='${x}'>${x}</a>`), true);
      assert.doesNotMatch(x, NOT_XML_CHAR);
    }),
    { seed: FUZZ_SEED + 2, numRuns: runs(3000) },
  );
});

test('POST /RPC2: every body gets HTTP 200 and well-formed XML holding a known fault or a ping reply with a reason', async (ctx) => {
  const n = runs(2000);
  const paths = ['/RPC2', '/rpc2', '/'];
  const contentTypes = [
    'text/xml',
    'application/xml',
    'text/xml; charset=iso-8859-1',
    'text/plain',
    'application/x-www-form-urlencoded',
    'text/xml; charset=utf-16',
    'text/xml; charset=x-nonsense',
    '',
  ];
  await fc.assert(
    fc.asyncProperty(
      anyRpcBody(seeds),
      fc.constantFrom(...paths),
      fc.constantFrom(...contentTypes),
      hostileHeaderValue,
      async (body, path, ct, ua) => {
        const res = await t.app.inject({
          method: 'POST',
          url: path,
          payload: body,
          headers: { ...(ct ? { 'content-type': ct } : {}), 'user-agent': ua, 'x-forwarded-for': ua },
        });
        assert.ok(res.statusCode < 500, `HTTP ${res.statusCode}`);
        assert.equal(XMLValidator.validate(res.body), true, 'well-formed reply');
        const r = readReply(res.statusCode, res.body);
        if (body.length > t.config.BODY_LIMIT) {
          assert.equal(res.statusCode, 413);
          assert.equal(r.faultString, `Request body larger than ${t.config.BODY_LIMIT} bytes.`);
          count('rpc:413');
          return;
        }
        assert.equal(res.statusCode, 200, res.body);
        if (r.faultCode !== undefined) {
          assert.ok(KNOWN_FAULTS.has(r.faultCode), `fault ${r.faultCode}: ${r.faultString}`);
          assert.ok((r.faultString ?? '').length > 0);
          count(`rpc:fault ${r.faultCode}`);
        } else if (r.flerror !== undefined) {
          assert.ok((r.message ?? '').length > 0);
          if (r.flerror === false) acked++;
          count(r.flerror ? 'rpc:flerror 1' : 'rpc:flerror 0');
        } else {
          // system.* answers: a methodResponse with params.
          assert.match(res.body, /^<\?xml version="1\.0"\?>\n<methodResponse><params><param><value>/);
          count('rpc:system');
        }
      },
    ),
    { seed: FUZZ_SEED + 3, numRuns: n },
  );
  ctx.diagnostic(`${n} requests: ${JSON.stringify(Object.fromEntries(Object.entries(tally).filter(([k]) => k.startsWith('rpc:'))))}`);
});

test('RSS Ping parser: generated and mutated rss_pings give a document or an RssPingError, nothing else', (ctx) => {
  const n = runs(2000);
  let docs = 0;
  fc.assert(
    fc.property(anyRssBody(rssSeeds), (body) => {
      try {
        const d = parseRssPing(body, 'text/xml');
        extractPayload(d.payload.text, d.siteUri, d.payload.type);
        docs++;
      } catch (e) {
        if (!(e instanceof RssPingError)) throw e;
        assert.ok(e.message.length > 0 && e.message.length <= 400, `message of ${e.message.length} characters`);
      }
    }),
    { seed: FUZZ_SEED + 6, numRuns: n },
  );
  ctx.diagnostic(`${n} rss_pings parsed, ${docs} with a usable payload`);
});

test('POST /rssping: every body gets a well-formed rss_ping_response, 200/400/401/403/413/429, with a reason', async (ctx) => {
  const n = runs(1000);
  await fc.assert(
    fc.asyncProperty(
      anyRssBody(rssSeeds),
      fc.constantFrom('/rssping', '/rssping/0123456789abcdef0123456789abcdef01234567', '/rssping/zz'),
      fc.constantFrom('text/xml', 'application/xml', 'text/xml; charset=utf-16', ''),
      async (body, path, ct) => {
        const res = await t.app.inject({ method: 'POST', url: path, payload: body, headers: ct ? { 'content-type': ct } : {} });
        assert.ok([200, 400, 401, 403, 413, 429].includes(res.statusCode), `HTTP ${res.statusCode}: ${res.body.slice(0, 300)}`);
        assert.equal(XMLValidator.validate(res.body), true, 'well-formed reply');
        const fl = /<flerror>([01])<\/flerror><message>([^<]+)<\/message>/.exec(res.body);
        assert.ok(fl, res.body.slice(0, 300));
        assert.equal(fl[1] === '0', res.statusCode === 200);
        if (res.statusCode === 200) acked++;
        count(`rss:${res.statusCode}`);
      },
    ),
    { seed: FUZZ_SEED + 7, numRuns: n },
  );
  ctx.diagnostic(`${n} requests: ${JSON.stringify(Object.fromEntries(Object.entries(tally).filter(([k]) => k.startsWith('rss:'))))}`);
});

test('GET /pingSiteForm and /ping: hostile query strings and headers get 200/400/403/429 HTML, never raw markup', async (ctx) => {
  const n = runs(1500);
  const marker = '<i data-fz="1">';
  const target = fc.oneof(
    { weight: 3, arbitrary: queryString },
    // Markup in every echoed field: it must come back escaped.
    {
      weight: 2,
      arbitrary: fc
        .tuple(hostileString(10), hostileUrl, hostileString(10))
        .map(
          ([a, u, b]) =>
            `name=${encodeURIComponentLoose(a + marker + b)}&url=${encodeURIComponentLoose(u + marker)}&changesURL=${encodeURIComponentLoose(marker)}`,
        ),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(hostileString(20), hostileUrl)
        .map(([a, u]) => `name=${encodeURIComponentLoose(a)}&url=${encodeURIComponentLoose(u)}`),
    },
  );
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom('/pingSiteForm', '/ping'),
      target,
      hostileHeaderValue,
      hostileHeaderValue,
      async (path, q, ua, xff) => {
        const res = await t.app.inject({
          method: 'GET',
          url: `${path}?${q}`,
          headers: { 'user-agent': ua, 'x-forwarded-for': xff, 'accept-language': ua },
        });
        assert.ok([200, 400, 403, 429].includes(res.statusCode), `HTTP ${res.statusCode} for ${q}`);
        assert.match(String(res.headers['content-type']), /^text\/html; charset=utf-8/);
        assert.ok(!res.body.includes(marker) && !res.body.includes('<i data-fz'), 'echoed input is escaped');
        if (res.statusCode !== 200) assert.match(res.body, /<p class="err">[^<]+<\/p>/, 'a refusal says why');
        else if (/Thanks for the ping\./.test(res.body)) acked++;
        count(`get:${res.statusCode}`);
      },
    ),
    { seed: FUZZ_SEED + 4, numRuns: n },
  );
  ctx.diagnostic(`${n} requests: ${JSON.stringify(Object.fromEntries(Object.entries(tally).filter(([k]) => k.startsWith('get:'))))}`);
});

test('published documents: hostile query strings and validators get 200/226/304/400/404 and well-formed XML', async (ctx) => {
  const n = runs(1000);
  await t.app.renderer.tick({ force: true });
  const etags: string[] = [];
  for (const p of ['/changes.xml', '/shortChanges.xml']) {
    const r = await t.app.inject({ method: 'GET', url: p });
    assert.equal(r.statusCode, 200);
    etags.push(String(r.headers.etag));
  }
  const hour = `/${new Date().toISOString().slice(0, 13).replace(/-/g, '/').replace('T', '/')}.xml`;
  const validator = fc.oneof(
    hostileHeaderValue,
    fc.constantFrom(
      ...etags,
      ...etags.map((e) => `W/${e}`),
      etags.join(', '),
      `${etags[0]}-gz`,
      '"1.zz"',
      '"999999999.abc"',
      '"-1.0"',
      '"1.' + 'z'.repeat(300) + '"',
    ),
  );
  const query = fc.oneof(
    fc.constant(''),
    fc.constantFrom(
      'since=',
      'since=%ff',
      'since=1.0',
      'since=-5.x',
      'since[]=1',
      'since=1&since=2',
      '__proto__=1',
      'since=' + 'a'.repeat(5000),
    ),
    fc.constantFrom(...etags).map((e) => `since=${encodeURIComponent(e.replace(/"/g, ''))}`),
    queryString,
  );
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom('/changes.xml', '/shortChanges.xml', '/updates.xml', hour, '/1999/01/01/00.xml', '/2024/13/40/25.xml'),
      query,
      fc.record(
        {
          'if-none-match': validator,
          'if-modified-since': hostileHeaderValue,
          'a-im': fc.constantFrom('feed', 'feed, gzip', 'FEED', '', 'x'),
          'accept-encoding': fc.constantFrom('gzip', 'br', 'br;q=0, gzip;q=0', '*', 'identity;q=0', 'gzip;q=nan', ''),
          range: hostileHeaderValue,
        },
        { requiredKeys: [] },
      ),
      fc.constantFrom('GET', 'HEAD'),
      async (path, q, headers, method) => {
        const res = await t.app.inject({ method: method as 'GET' | 'HEAD', url: q ? `${path}?${q}` : path, headers });
        assert.ok(
          [200, 226, 304, 400, 404, 503].includes(res.statusCode),
          `HTTP ${res.statusCode} for ${path}?${q} ${JSON.stringify(headers)}: ${res.body.slice(0, 200)}`,
        );
        if (res.statusCode === 503) assert.match(res.body, /has not been rendered yet/);
        if ((res.statusCode === 200 || res.statusCode === 226) && method === 'GET') {
          const ce = res.headers['content-encoding'];
          const raw = res.rawPayload;
          const xml = (ce === 'gzip' ? zlib.gunzipSync(raw) : ce === 'br' ? zlib.brotliDecompressSync(raw) : raw).toString('utf8');
          assert.equal(XMLValidator.validate(xml), true, `${path}: well-formed`);
          assert.doesNotMatch(xml, NOT_XML_CHAR, `${path}: only XML 1.0 characters`);
          assert.equal(Number(res.headers['content-length']), raw.length);
        }
        count(`doc:${res.statusCode}`);
      },
    ),
    { seed: FUZZ_SEED + 8, numRuns: n },
  );
  ctx.diagnostic(`${n} requests: ${JSON.stringify(Object.fromEntries(Object.entries(tally).filter(([k]) => k.startsWith('doc:'))))}`);
});

test('any method, path and headers: never a 5xx', async (ctx) => {
  const n = runs(600);
  const methods = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD'] as const;
  const paths = fc.oneof(
    fc.constantFrom(
      '/',
      '/RPC2',
      '/rpc2',
      '/ping',
      '/pingSiteForm',
      '/rssping',
      '/changes.xml',
      '/shortChanges.xml',
      '/2024/01/01/00.xml',
      '/metrics',
      '/healthz',
      '/readyz',
      '/rssping/token?site_uri=%ff',
      '/rssping/token?site_uri=http%3A%2F%2F127.0.0.1%2F',
      '/rssping/token',
      '/%ff',
      '/..%2f..%2fetc%2fpasswd',
      '/RPC2/',
      '//RPC2',
      '/RPC2?x=%00',
      '/9999/99/99/99.xml',
      '/changes.xml?since=-1&a=%zz',
    ),
    fc.string({ unit: 'binary-ascii', maxLength: 40 }).map((s) => `/${encodeURIComponentLoose(s)}`),
  );
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...methods),
      paths,
      fc.dictionary(
        fc.constantFrom(
          'content-type',
          'content-encoding',
          'accept-encoding',
          'if-none-match',
          'if-modified-since',
          'a-im',
          'range',
          'accept',
          'authorization',
          'x-forwarded-for',
          'x-request-id',
        ),
        hostileHeaderValue,
        { maxKeys: 4 },
      ),
      fc.uint8Array({ maxLength: 200 }),
      async (method, url, headers, body) => {
        const res = await t.app.inject({
          method,
          url,
          headers,
          ...(method === 'GET' || method === 'HEAD' ? {} : { payload: Buffer.from(body) }),
        });
        assert.ok(
          res.statusCode < 500 || res.statusCode === 503,
          `HTTP ${res.statusCode} for ${method} ${url} ${JSON.stringify(headers)}: ${res.body.slice(0, 200)}`,
        );
        count(`any:${res.statusCode}`);
      },
    ),
    { seed: FUZZ_SEED + 5, numRuns: n },
  );
  ctx.diagnostic(`${n} requests: ${JSON.stringify(Object.fromEntries(Object.entries(tally).filter(([k]) => k.startsWith('any:'))))}`);
});

test('afterwards: every acknowledged ping was stored, stored text is valid XML text, a valid ping still succeeds', async () => {
  assert.ok(acked > 0, 'the generators produced some valid pings');
  assert.equal((await countPings(t.app.db)) - startCount, acked, 'acknowledged == stored');
  const rows = await t.app.db.query<{
    name: string;
    url: string;
    changes_url: string | null;
    rss_url: string | null;
    tags: string[] | null;
    user_agent: string | null;
  }>('select name, url, changes_url, rss_url, tags, user_agent from pings');
  for (const r of rows)
    for (const s of [r.name, r.url, r.changes_url ?? '', r.rss_url ?? '', r.user_agent ?? '', ...(r.tags ?? [])])
      assert.doesNotMatch(s, NOT_XML_CHAR, JSON.stringify(s));
  // Everything the fuzzing got stored, published: an independent strict parser (expat) reads every document.
  await t.app.renderer.tick({ force: true });
  for (const p of ['/changes.xml', '/shortChanges.xml']) {
    const r = await t.app.inject({ method: 'GET', url: p });
    assert.equal(r.statusCode, 200, p);
    const doc = strictParse(r.rawPayload);
    assert.ok(doc.children.length > 0, `${p}: the fuzzed pings are published`);
  }
  const updates = await t.app.inject({ method: 'GET', url: '/updates.xml' });
  assert.equal(updates.statusCode, 200);
  const expat = spawnSync(
    'python3',
    ['-c', 'import sys, xml.parsers.expat; xml.parsers.expat.ParserCreate().Parse(sys.stdin.buffer.read(), True)'],
    { input: updates.rawPayload },
  );
  assert.equal(expat.status, 0, `/updates.xml: ${expat.stderr}`);
  await t.listen();
  const res = await fetch(`${t.url}/RPC2`, {
    method: 'POST',
    headers: { 'content-type': 'text/xml' },
    body: methodCall('weblogUpdates.ping', ['Still here', uniqueUrl('after-fuzz')]),
  });
  assert.equal(readReply(res.status, await res.text()).flerror, false);
});

test('no unhandled rejection or uncaught exception during the fuzzing', () => {
  assert.deepEqual(problems, []);
});
