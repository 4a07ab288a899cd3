// The open hub driven by a real third-party subscriber: the npm `pubsubhubbub` package (1.0.2), as feed
// readers built on it subscribe. It POSTs the subscription (with `hub.verify=async`, which WebSub ignores),
// answers the intent GET with the challenge, and emits each delivery it accepts as a `feed` event. Its own
// bug with secrets: it sends the hub an HMAC of the topic instead of its secret, then checks deliveries
// against the secret itself, so a signed delivery never reaches its `feed` event (it answers 202): that
// is the client's mismatch, not the hub's, and is shown here as it happens.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createHmac } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import pubsubhubbub from 'pubsubhubbub';
import type { TestApp } from '../../helpers/app.js';
import { startFeedServer, type FeedServer } from '../../helpers/feed-server.js';
import { hubApp, queued, waitForHub } from './helpers.js';

interface Client {
  emitter: ReturnType<typeof pubsubhubbub.createServer>;
  feeds: { topic: string; feed: Buffer; headers: Record<string, string> }[];
  subscribed: string[];
  answers: number[];
  close(): Promise<void>;
}

/** A pubsubhubbub subscriber on its own loopback address, served through its `listener()`. */
async function startClient(host: string, secret?: string): Promise<Client> {
  const server = http.createServer();
  await new Promise<void>((r) => server.listen(0, host, r));
  const { port } = server.address() as AddressInfo;
  const emitter = pubsubhubbub.createServer({ callbackUrl: `http://${host}:${port}/cb`, ...(secret ? { secret } : {}) });
  const client: Client = { emitter, feeds: [], subscribed: [], answers: [], close: () => new Promise((r) => server.close(() => r())) };
  const listener = emitter.listener();
  server.on('request', (req, res) => {
    res.on('finish', () => req.method === 'POST' && client.answers.push(res.statusCode));
    listener(req, res);
  });
  emitter.on('subscribe', (d: { topic: string }) => client.subscribed.push(d.topic));
  emitter.on('feed', (d: { topic: string; feed: Buffer; headers: Record<string, string> }) => client.feeds.push(d));
  emitter.on('error', () => undefined);
  return client;
}

let t: TestApp;
let hub: string;
let blog: FeedServer;
let topic: string;
let items = ['1'];
const feed = () =>
  `<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>Client test</title><link>${blog.origin}/</link><description>d</description>` +
  items.map((n) => `<item><title>Post ${n}</title><link>${blog.origin}/p/${n}</link><guid>${blog.origin}/p/${n}</guid></item>`).join('') +
  '</channel></rss>';

before(async () => {
  t = await hubApp({ VERIFY_PINGS: 'mark', VERIFY_FEED_INTERVAL: 0 });
  Object.assign(t.app.websub.timing, { retryBaseMs: 20, retryMaxMs: 100 });
  hub = `${await t.listen()}/websub`;
  blog = await startFeedServer('127.0.0.52');
  topic = `${blog.origin}/feed.xml`;
  blog.route('/feed.xml', (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/rss+xml' });
    res.end(feed());
  });
});
after(async () => {
  await t?.close();
  await blog?.close();
});

async function publish(): Promise<void> {
  const r = await fetch(hub, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: `hub.mode=publish&hub.url=${encodeURIComponent(topic)}`,
  });
  assert.equal(r.status, 204, await r.text());
}

test('the pubsubhubbub client subscribes to a feed, confirms the intent, and receives only the new entry', async () => {
  const client = await startClient('127.0.0.36');
  try {
    const accepted = await new Promise<Error | null>((r) => client.emitter.subscribe(topic, hub, (err) => r(err)));
    assert.equal(accepted, null, 'the hub accepted the subscription request (202)');
    await waitForHub(t, () => client.subscribed.includes(topic), 'the client to confirm the intent');
    await waitForHub(t, async () => (await queued(t)) === 0, 'the topic checked and the subscription stored');

    items = ['2', ...items];
    await publish();
    await waitForHub(t, () => client.feeds.length === 1, 'the delivery to reach the client');
    const got = client.feeds[0];
    assert.equal(got.topic, topic);
    assert.equal(got.headers['content-type'], 'application/rss+xml');
    const body = got.feed.toString('utf8');
    assert.match(body, /<item><title>Post 2<\/title>/);
    assert.doesNotMatch(body, /Post 1/, 'only the new entry');
    assert.deepEqual(client.answers, [204]);
  } finally {
    await client.close();
  }
});

test("with a secret the client's own mismatch shows: the hub signs with the secret it was given, the client checks another and answers 202", async () => {
  const secret = 'client-secret';
  const client = await startClient('127.0.0.37', secret);
  try {
    const accepted = await new Promise<Error | null>((r) => client.emitter.subscribe(topic, hub, (err) => r(err)));
    assert.equal(accepted, null);
    await waitForHub(t, () => client.subscribed.includes(topic), 'the client to confirm the intent');
    await waitForHub(t, async () => (await queued(t)) === 0, 'the topic checked and the subscription stored');

    items = ['3', ...items];
    await publish();
    await waitForHub(t, () => client.answers.length === 1, 'the signed delivery to be answered');
    // The client sent HMAC-SHA1(secret, topic) as hub.secret; the delivery was signed with that, as the
    // spec says, and the client compared it with an HMAC keyed by its original secret.
    assert.deepEqual(client.answers, [202], 'the client answers 202 to a signature it does not expect');
    assert.equal(client.feeds.length, 0, 'and does not emit the feed');
    const derived = createHmac('sha1', secret).update(topic).digest('hex');
    assert.notEqual(derived, secret);
  } finally {
    await client.close();
  }
});
