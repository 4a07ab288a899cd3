// Replays the hostile corpus (test/fixtures/hostile, see build.mjs there) against the endpoints and asserts
// the exact answer to each: entity bombs, XXE, floods, deep nesting, prototype names, encodings, markup.
// The regressions the fuzzing found are in it, named after what broke.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { XMLValidator } from 'fast-xml-parser';
import { startApp, readReply, unescapeXml, type TestApp } from '../helpers/app.js';
import { findPingsByUrl } from '../helpers/rows.js';

interface Expect {
  status: number;
  faultCode?: number;
  faultString?: string;
  faultStringPrefix?: string;
  faultStringMaxLength?: number;
  flerror?: boolean;
  message?: string;
  stored?: { url: string; name: string };
  messagePrefix?: string;
  messageMaxLength?: number;
  bodyIncludes?: string[];
  bodyExcludes?: string[];
}
interface Entry {
  file: string;
  what: string;
  headers?: Record<string, string>;
  expect: Expect;
}

const DIR = new URL('../fixtures/hostile/', import.meta.url).pathname;
const corpus = JSON.parse(readFileSync(join(DIR, 'index.json'), 'utf8')) as Entry[];

let t: TestApp;
before(async () => {
  // RSSPING_VERIFY_HASH_URI stays on: the hash-URI fixtures point at forbidden addresses, refused before any
  // connection (no network is used).
  t = await startApp({ BODY_LIMIT: 65536, RSSPING_BODY_LIMIT: 262144 });
});
after(async () => {
  await t.close();
});

test('the corpus covers every attack class the issue names', () => {
  const files = corpus.map((e) => e.file).join(' ');
  for (const needle of [
    'rss-ping/billion-laughs',
    'rss-ping/hash-uri-cloud-metadata',
    'billion-laughs',
    'quadratic-blowup',
    'xxe-file',
    'xxe-parameter',
    'amp-flood',
    'deep-nesting',
    'proto-element',
    'proto-struct-member',
    'invalid-utf8',
    'utf16be-bom',
    'declared-latin1-sent-utf8',
    'nul-and-controls',
    'markup-in-name',
    'http/xss-form-echo',
  ]) {
    assert.ok(files.includes(needle), needle);
  }
});

for (const e of corpus) {
  test(`${e.file}: ${e.what}`, async () => {
    const bytes = readFileSync(join(DIR, e.file));
    const res = e.file.startsWith('http/')
      ? await t.app.inject({ method: 'GET', url: bytes.toString('latin1').trim() })
      : await t.app.inject({
          method: 'POST',
          url: e.file.startsWith('rss-ping/') ? '/rssping' : '/RPC2',
          headers: e.headers ?? { 'content-type': 'text/xml' },
          payload: bytes,
        });
    const x = e.expect;
    assert.equal(res.statusCode, x.status);
    if (e.file.startsWith('xmlrpc/')) {
      assert.equal(XMLValidator.validate(res.body), true, 'the reply is well-formed XML');
      const r = readReply(res.statusCode, res.body);
      if (x.faultCode !== undefined) {
        assert.equal(r.faultCode, x.faultCode, r.faultString ?? r.message);
        if (x.faultString !== undefined) assert.equal(r.faultString, x.faultString);
        if (x.faultStringPrefix !== undefined) assert.ok(r.faultString?.startsWith(x.faultStringPrefix), r.faultString);
        if (x.faultStringMaxLength !== undefined)
          assert.ok((r.faultString ?? '').length <= x.faultStringMaxLength, `fault string of ${r.faultString?.length} characters`);
        assert.equal(r.flerror, undefined);
      } else {
        assert.equal(r.faultCode, undefined, r.faultString);
        assert.equal(r.flerror, x.flerror, r.message);
        if (x.message !== undefined) assert.equal(r.message, x.message);
      }
      assert.doesNotMatch(res.body, /root:x:0:0|ami-id|instance-id/, 'nothing from a file or the metadata service');
    } else if (e.file.startsWith('rss-ping/')) {
      assert.equal(XMLValidator.validate(res.body), true, 'the reply is well-formed XML');
      const m = /<rss_ping_response><flerror>([01])<\/flerror><message>([^<]*)<\/message>/.exec(res.body);
      assert.ok(m, res.body);
      assert.equal(m[1] === '0', x.status === 200);
      const message = unescapeXml(m[2]);
      if (x.message !== undefined) assert.equal(message, x.message);
      if (x.messagePrefix !== undefined) assert.ok(message.startsWith(x.messagePrefix), message);
      if (x.messageMaxLength !== undefined) assert.ok(message.length <= x.messageMaxLength, `message of ${message.length} characters`);
    } else {
      assert.match(String(res.headers['content-type']), /^text\/html/);
      for (const s of x.bodyIncludes ?? []) assert.ok(res.body.includes(s), `body includes ${s}`);
      for (const s of x.bodyExcludes ?? []) assert.ok(!res.body.includes(s), `body does not include ${s}`);
    }
    if (x.stored) {
      const rows = await findPingsByUrl(t.app.db, x.stored.url);
      assert.equal(rows.length, 1);
      assert.equal(rows[0].name, x.stored.name);
    }
    assert.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype untouched');
  });
}

test('every XML-RPC and RSS Ping fixture parses within 64 MB of heap: nothing is ever expanded', async () => {
  // A worker with a small heap: an expanded billion laughs (3 GB) or quadratic blow-up (200 MB) would kill it
  // with ERR_WORKER_OUT_OF_MEMORY instead of answering.
  const files = corpus.filter((e) => !e.file.startsWith('http/')).map((e) => join(DIR, e.file));
  const src = `
    const { parentPort, workerData } = require('node:worker_threads');
    const { readFileSync } = require('node:fs');
    (async () => {
      const { register } = await import('tsx/esm/api');
      register();
      const { parseMethodCall } = await import(workerData.parse);
      const { parseRssPing } = await import(workerData.rssParse);
      const { extractPayload } = await import(workerData.rssPayload);
      const out = [];
      for (const f of workerData.files) {
        try {
          if (f.includes('/rss-ping/')) { const d = parseRssPing(readFileSync(f), 'text/xml'); extractPayload(d.payload.text, null, d.payload.type); }
          else parseMethodCall(readFileSync(f), 'text/xml');
          out.push('ok');
        }
        catch (e) { out.push(e && (e.faultCode !== undefined || e.code === 'RSSPING_INVALID') ? 'refused' : 'error ' + e); }
      }
      parentPort.postMessage(out);
    })().catch((e) => parentPort.postMessage(String(e)));`;
  const worker = new Worker(src, {
    eval: true,
    workerData: {
      files,
      parse: new URL('../../src/intake/xmlrpc/parse.ts', import.meta.url).href,
      rssParse: new URL('../../src/intake/rss-ping/parse.ts', import.meta.url).href,
      rssPayload: new URL('../../src/intake/rss-ping/payload.ts', import.meta.url).href,
    },
    resourceLimits: { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 16 },
  });
  const results = await new Promise<unknown>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  await worker.terminate();
  assert.ok(Array.isArray(results), String(results));
  assert.equal(results.length, files.length);
  for (const r of results as string[]) assert.doesNotMatch(r, /^error/);
});
