// Publisher-side authentication: `pingd publisher add|list|remove`, GET /rssping/token, and the
// single-use POST /rssping/<sha1(site_uri + password + token)>.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createHash, randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, startApp, type TestApp, type TestDatabase } from '../../helpers/app.js';
import { main } from '../../../src/cli.js';
import { deriveKey, endpointDigests, openPassword, sealPassword, SecretBoxError } from '../../../src/intake/rss-ping/secret-box.js';
import { MAX_LIVE_TOKENS } from '../../../src/intake/rss-ping/token-repository.js';
import { TOKEN_REQUESTS_PER_MIN } from '../../../src/intake/rss-ping/token-route.js';
import { readRssPingReply, rssPing } from './helpers.js';
import { findPayloadsBySite } from '../../helpers/rows.js';
import { CLI } from '../../helpers/cli.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const SECRET = randomBytes(32).toString('hex');
const SITE_A = 'http://publisher-a.example.com/';
const SITE_B = 'https://publisher-b.example.com/blog/';
const PASSWORD_B = 'correct horse battery staple';

let db: TestDatabase;
let t: TestApp;
let passwordA = '';

/** Runs the CLI in-process with the test database, capturing what it prints. */
async function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<{ code: number; out: string; err: string }> {
  const saved = { ...process.env };
  const out: string[] = [];
  const err: string[] = [];
  const log = console.log;
  const error = console.error;
  Object.assign(process.env, {
    DATABASE_URL: db.config.DATABASE_URL ?? '',
    DATA_DIR: db.config.DATA_DIR ?? '',
    RSSPING_SECRET: SECRET,
    LOG_LEVEL: 'silent',
    ...env,
  });
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete process.env[k];
  console.log = (...a: unknown[]) => void out.push(a.join(' '));
  console.error = (...a: unknown[]) => void err.push(a.join(' '));
  try {
    const code = await main(args);
    // Without the line naming the database and the warning about a directory no server ran on (checked in
    // test/cli.test.ts): these tests are about the command's own refusals.
    const own = err.filter((l) => !/^pingd: (database|warning): /.test(l));
    return { code, out: out.join('\n'), err: own.join('\n') };
  } finally {
    console.log = log;
    console.error = error;
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
    Object.assign(process.env, saved);
  }
}

before(async () => {
  db = await createTestDatabase();
});

after(async () => {
  await t?.close();
  await db?.drop();
});

test('publisher add refuses before migrations, without RSSPING_SECRET, and with bad arguments', async () => {
  const early = await cli(['publisher', 'add', SITE_A]);
  assert.deepEqual([early.code, early.err], [1, 'pingd publisher: the database schema is not up to date; run `pingd migrate` first.']);
  assert.equal((await cli(['migrate'])).code, 0);
  const noSecret = await cli(['publisher', 'add', SITE_A], { RSSPING_SECRET: undefined });
  assert.equal(noSecret.code, 78);
  assert.match(noSecret.err, /^pingd publisher: RSSPING_SECRET is not set; publisher passwords are encrypted with it/);
  assert.equal((await cli(['publisher'])).code, 2);
  assert.equal((await cli(['publisher', 'add'])).code, 2);
  assert.equal((await cli(['publisher', 'frobnicate', SITE_A])).code, 2);
  const ftp = await cli(['publisher', 'add', 'ftp://example.com/']);
  assert.equal(ftp.code, 2);
  assert.match(ftp.err, /^pingd publisher: The site_uri must use http or https, not ftp\./);
  const short = await cli(['publisher', 'add', SITE_A, '--password', 'short']);
  assert.equal(short.code, 2);
  assert.match(short.err, /--password must be 12 to 1024 characters/);
  assert.equal((await cli(['publisher', 'list', '--password', 'x'.repeat(20)])).code, 2);
  assert.equal((await cli(['publisher', 'add', 'x', '--secret-typo'])).code, 2, 'unknown flags are usage errors');
});

test('publisher add generates and prints a password once, or takes one; list and remove', async () => {
  const a = await cli(['publisher', 'add', 'http://Publisher-A.example.com']);
  assert.equal(a.code, 0, a.err);
  const m = /^publisher added: http:\/\/publisher-a\.example\.com\/\npassword: (\S+)\n\(shown once/.exec(a.out);
  assert.ok(m, a.out);
  passwordA = m[1];
  assert.equal(passwordA.length, 24);
  const b = await cli(['publisher', 'add', SITE_B, '--password', PASSWORD_B, '--json']);
  assert.deepEqual(JSON.parse(b.out), { site_uri: SITE_B, replaced: false }, 'a given password is not echoed');
  const dup = await cli(['publisher', 'add', SITE_B, '--password', PASSWORD_B]);
  assert.deepEqual([dup.code, dup.err], [1, `pingd publisher: ${SITE_B} is already registered (use --replace to set a new password).`]);
  const c = await cli(['publisher', 'add', 'http://publisher-c.example.com/']);
  assert.equal(c.code, 0);
  const list = await cli(['publisher', 'list']);
  assert.deepEqual(
    list.out.split('\n').map((l) => l.split('\t')[0]),
    ['http://publisher-a.example.com/', 'http://publisher-c.example.com/', SITE_B],
  );
  assert.deepEqual(
    (await cli(['publisher', 'remove', 'http://publisher-c.example.com/'])).out,
    'publisher removed: http://publisher-c.example.com/',
  );
  const gone = await cli(['publisher', 'remove', 'http://publisher-c.example.com/']);
  assert.deepEqual([gone.code, gone.err], [1, 'pingd publisher: http://publisher-c.example.com/ is not registered.']);
  // The real command line, in its own process.
  const env = { ...process.env, DATABASE_URL: db.config.DATABASE_URL ?? '', DATA_DIR: db.config.DATA_DIR ?? '', LOG_LEVEL: 'silent' };
  const { stdout } = await run(process.execPath, [...CLI, 'publisher', 'list', '--json'], { cwd: ROOT, env });
  assert.deepEqual(
    (JSON.parse(stdout) as { site_uri: string; live_tokens: number }[]).map((p) => [p.site_uri, p.live_tokens]),
    [
      ['http://publisher-a.example.com/', 0],
      [SITE_B, 0],
    ],
  );
});

test('passwords are stored sealed, never in clear', async () => {
  t = await startApp({ RSSPING_SECRET: SECRET, PING_MIN_INTERVAL: 0 }, db);
  await t.listen();
  const rows = await t.app.db.query<{ site_url: string; password_sealed: Uint8Array }>(
    'select site_url, password_sealed from rssping_publishers order by site_url',
  );
  for (const r of rows) {
    const sealed = Buffer.from(r.password_sealed);
    assert.equal(sealed.includes(Buffer.from(passwordA)), false);
    assert.equal(sealed.includes(Buffer.from(PASSWORD_B)), false);
  }
  assert.equal(openPassword(deriveKey(SECRET), SITE_B, rows.find((r) => r.site_url === SITE_B)!.password_sealed), PASSWORD_B);
});

async function token(site: string): Promise<{ status: number; body: string; type: string; cache: string }> {
  const res = await fetch(`${t.url}/rssping/token?site_uri=${encodeURIComponent(site)}`);
  return {
    status: res.status,
    body: await res.text(),
    type: res.headers.get('content-type') ?? '',
    cache: res.headers.get('cache-control') ?? '',
  };
}

async function post(path: string, body: string) {
  const res = await t.app.inject({ method: 'POST', url: path, headers: { 'content-type': 'text/xml' }, payload: body });
  return readRssPingReply(res.statusCode, res.body);
}

const sha1 = (s: string) => createHash('sha1').update(s, 'utf8').digest('hex');

test('the whole flow with curl: a token, then one POST to /rssping/<sha1(site_uri + password + token)>', async () => {
  const site = 'http://publisher-a.example.com';
  const { stdout: tok } = await run('curl', ['-sS', '--get', '--data-urlencode', `site_uri=${site}`, `${t.url}/rssping/token`]);
  assert.match(tok, /^\d{8}T\d{6}Z-[0-9a-f]{32}$/, 'the body is the token alone');
  const endpoint = sha1(site + passwordA + tok);
  const body = rssPing({
    siteUri: site,
    payload: '<item><title>Signed by the publisher</title><link>http://publisher-a.example.com/p/1</link></item>',
  });
  const { stdout } = await run('curl', [
    '-sS',
    '-X',
    'POST',
    '-H',
    'Content-Type: text/xml',
    '--data-binary',
    body,
    '-w',
    '\n%{http_code}',
    `${t.url}/rssping/${endpoint}`,
  ]);
  const r = readRssPingReply(Number(stdout.slice(stdout.lastIndexOf('\n') + 1)), stdout.slice(0, stdout.lastIndexOf('\n')));
  assert.deepEqual(
    [r.status, r.flerror, r.authentication, r.message],
    [200, false, 'publisher_side', 'Thanks for the ping. Authenticated: publisher_side.'],
  );
  const [row] = await findPayloadsBySite(t.app.db, SITE_A);
  assert.deepEqual([row.auth, row.headline], ['publisher_side', 'Signed by the publisher']);

  const replay = await post(`/rssping/${endpoint}`, body);
  assert.deepEqual(
    [replay.status, replay.flerror, replay.message],
    [401, true, 'Unknown or already used endpoint: get a new token from GET /rssping/token (each endpoint works once).'],
  );
  assert.equal((await findPayloadsBySite(t.app.db, SITE_A)).length, 1, 'the replay stored nothing');
});

test('the token response is text/plain and not cacheable; unknown sites and bad requests are refused', async () => {
  const ok = await token(SITE_B);
  assert.equal(ok.status, 200);
  assert.equal(ok.type, 'text/plain; charset=utf-8');
  assert.equal(ok.cache, 'no-store');
  assert.deepEqual(await token('http://nobody.example.com/'), {
    status: 404,
    body: 'No publisher is registered for http://nobody.example.com/.\n',
    type: 'text/plain; charset=utf-8',
    cache: 'no-store',
  });
  const res = await fetch(`${t.url}/rssping/token`);
  assert.deepEqual([res.status, await res.text()], [400, 'site_uri is missing: GET /rssping/token?site_uri=<your site URI>\n']);
  assert.deepEqual(
    [(await token('javascript:alert(1)')).status, (await token('javascript:alert(1)')).body],
    [400, 'The site_uri must use http or https, not javascript.\n'],
  );
});

test('an expired endpoint is refused (401), and so is a wrong password, an unknown endpoint or a malformed one', async () => {
  const tok = (await token(SITE_B)).body;
  const endpoint = sha1(SITE_B + PASSWORD_B + tok);
  // Five minutes pass.
  await t.app.db.query("update rssping_tokens set expires_at = now() - interval '1 second' where endpoint_sha1 = $1", [endpoint]);
  const body = rssPing({ siteUri: SITE_B });
  const expired = await post(`/rssping/${endpoint}`, body);
  assert.deepEqual(
    [expired.status, expired.message],
    [401, 'Expired endpoint: tokens are valid for 5 minutes; get a new one from GET /rssping/token.'],
  );
  assert.equal((await post(`/rssping/${endpoint}`, body)).status, 401);

  const tok2 = (await token(SITE_B)).body;
  assert.equal((await post(`/rssping/${sha1(SITE_B + 'wrong password' + tok2)}`, body)).status, 401);
  const bad = await post('/rssping/not-hex', body);
  assert.deepEqual(
    [bad.status, bad.message],
    [401, 'Unknown endpoint: POST to /rssping/<sha1 hex of site_uri + password + token>, with a token from GET /rssping/token.'],
  );
  assert.equal((await findPayloadsBySite(t.app.db, SITE_B)).length, 0);
  // The right one still works (the wrong guesses did not use it up), upper-case hex too.
  const ok = await post(`/rssping/${sha1(SITE_B + PASSWORD_B + tok2).toUpperCase()}`, body);
  assert.equal(ok.authentication, 'publisher_side', ok.message);
});

test('a malformed rss_ping (400) does not use up the endpoint; a ping for another site does (403)', async () => {
  const tok = (await token(SITE_B)).body;
  const endpoint = sha1(SITE_B + PASSWORD_B + tok);
  const malformed = await post(`/rssping/${endpoint}`, rssPing({ siteUri: SITE_B, payload: '<item><title>no link</title></item>' }));
  assert.equal(malformed.status, 400);
  const other = await post(`/rssping/${endpoint}`, rssPing({ siteUri: 'http://publisher-a.example.com/' }));
  assert.deepEqual(
    [other.status, other.message],
    [403, `This endpoint was issued for ${SITE_B}, not for http://publisher-a.example.com/.`],
  );
  assert.equal((await post(`/rssping/${endpoint}`, rssPing({ siteUri: SITE_B }))).status, 401, 'used up by the 403');
});

test('the MD5 endpoint works too, once', async () => {
  const tok = (await token(SITE_B)).body;
  const endpoint = createHash('md5')
    .update(SITE_B + PASSWORD_B + tok)
    .digest('hex');
  assert.equal((await post(`/rssping/${endpoint}`, rssPing({ siteUri: SITE_B }))).authentication, 'publisher_side');
  assert.equal((await post(`/rssping/${endpoint}`, rssPing({ siteUri: SITE_B }))).status, 401);
});

test('two concurrent uses of one endpoint: exactly one wins', async () => {
  for (let round = 0; round < 3; round++) {
    const tok = (await token(SITE_B)).body;
    const endpoint = sha1(SITE_B + PASSWORD_B + tok);
    const body = rssPing({ siteUri: SITE_B });
    const results = await Promise.all(
      [1, 2, 3].map(() =>
        fetch(`${t.url}/rssping/${endpoint}`, { method: 'POST', headers: { 'content-type': 'text/xml' }, body }).then((r) => r.status),
      ),
    );
    assert.deepEqual(results.sort(), [200, 401, 401]);
  }
});

test(`a publisher holds at most ${MAX_LIVE_TOKENS} live tokens and a new one never evicts them (REGRESSION: 25 requests by anyone voided the publisher's token); removing the publisher voids them`, async () => {
  const toks: string[] = [];
  for (let i = 0; i < MAX_LIVE_TOKENS; i++) {
    const r = await token(SITE_A.replace(/\/$/, ''));
    assert.equal(r.status, 200);
    toks.push(r.body);
  }
  const refused = await fetch(`${t.url}/rssping/token?site_uri=${encodeURIComponent(SITE_A)}`);
  assert.equal(refused.status, 429);
  const wait = Number(refused.headers.get('retry-after'));
  assert.ok(wait > 250 && wait <= 300, `Retry-After ${wait}`);
  assert.equal(
    await refused.text(),
    `${SITE_A} already has ${MAX_LIVE_TOKENS} unused tokens; use one, or ask again in ${wait} seconds when the oldest expires.\n`,
  );
  const live = await t.app.db.query<{ n: number }>(
    'select count(*)::int as n from rssping_tokens t join rssping_publishers p on p.id = t.publisher_id where p.site_url = $1 and t.expires_at > now()',
    [SITE_A],
  );
  assert.equal(Number(live[0].n), MAX_LIVE_TOKENS);
  const site = 'http://publisher-a.example.com';
  assert.equal(
    (await post(`/rssping/${sha1(site + passwordA + toks[0])}`, rssPing({ siteUri: site }))).status,
    200,
    'the first token still works',
  );
  // Using one frees a place.
  assert.equal((await token(site)).status, 200);
  const removed = await t.app.db.query('delete from rssping_publishers where site_url = $1 returning id', [SITE_A]);
  assert.equal(removed.length, 1);
  assert.equal((await post(`/rssping/${sha1(site + passwordA + toks[toks.length - 2])}`, rssPing({ siteUri: site }))).status, 401);
  assert.equal((await token(site)).status, 404);
});

test(`one client may ask for ${TOKEN_REQUESTS_PER_MIN} tokens a minute, whatever the site (then 429 with Retry-After)`, async () => {
  const other = await startApp({ RSSPING_SECRET: SECRET });
  try {
    // The bucket refills while the requests run (2 a second): count until the first refusal.
    let answered = 0;
    let r = await other.app.inject({ method: 'GET', url: '/rssping/token?site_uri=http%3A%2F%2Fnobody.example.com%2F' });
    while (r.statusCode === 404 && answered < 1000) {
      answered++;
      r = await other.app.inject({
        method: 'GET',
        url: `/rssping/token?site_uri=${encodeURIComponent(`http://nobody-${answered}.example.com/`)}`,
      });
    }
    assert.equal(r.statusCode, 429);
    assert.ok(answered >= TOKEN_REQUESTS_PER_MIN && answered < 1000, `${answered} answered before the first refusal`);
    // The next token of the client's bucket comes in 60 / TOKEN_REQUESTS_PER_MIN seconds, rounded up.
    const wait = String(Math.ceil(60 / TOKEN_REQUESTS_PER_MIN));
    assert.equal(r.headers['retry-after'], wait);
    assert.equal(
      r.body,
      `Too many token requests from your address (at most ${TOKEN_REQUESTS_PER_MIN} a minute); ask again in ${wait} seconds.\n`,
    );
  } finally {
    await other.close();
  }
});

test('secret box: sealed to its site and key; endpoint digests are sha1/md5 of the plain concatenation', () => {
  const key = deriveKey(SECRET);
  const sealed = sealPassword(key, SITE_B, 'pässword');
  assert.equal(openPassword(key, SITE_B, sealed), 'pässword');
  assert.throws(() => openPassword(key, SITE_A, sealed), SecretBoxError, 'bound to its site');
  assert.throws(() => openPassword(deriveKey('another secret that is long enough to use'), SITE_B, sealed), SecretBoxError);
  const tampered = Buffer.from(sealed);
  tampered[tampered.length - 1] ^= 1;
  assert.throws(() => openPassword(key, SITE_B, tampered), SecretBoxError);
  assert.notDeepEqual(sealPassword(key, SITE_B, 'pässword'), sealed, 'a fresh IV every time');
  // Known answers (computed with Python's hashlib).
  assert.deepEqual(endpointDigests('http://photomatt.net', 'correct horse battery', '20250101T000000Z-00112233445566778899aabbccddeeff'), {
    sha1: '081f30bd62686747d02ed01129f370323f3592e5',
    md5: '2cf2185994f90b9cd458aac2192a0a59',
  });
  assert.equal(endpointDigests('http://exämple.com/', 'pässword', 'tok').sha1, '740a51f308a3c7da2bfd23d93f5f5b311ad3f2f3', 'UTF-8');
});
