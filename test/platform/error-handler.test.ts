// The root error handler: a 5xx names its code and request id but never sends the error's own text (a
// driver's message, a URL); a 4xx keeps its message, which is meant for the client.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startApp } from '../helpers/app.js';
import { errorAnswer } from '../../src/platform/error-handler.js';

test('a database failure under /api answers 503 without the driver\'s message (it leaked "the embedded database is closed")', async () => {
  const t = await startApp({ RENDER_SCHEDULER: false });
  try {
    await t.app.db.close();
    const r = await t.app.inject({ url: '/api/weblogs?url=http://example.com/private-path' });
    assert.equal(r.statusCode, 503);
    assert.equal(r.headers['retry-after'], '10');
    const body = r.json();
    assert.equal(body.code, 'DB_QUERY_FAILED');
    assert.equal(body.requestId, r.headers['x-request-id']);
    assert.equal(
      body.message,
      'The service cannot answer this request right now (its database or a queue is busy or down); try again shortly.',
    );
    assert.doesNotMatch(r.body, /closed|private-path|embedded/);
  } finally {
    await t.close();
  }
});

test('a 4xx keeps its message (a validation error tells the client what to fix)', async () => {
  const t = await startApp({ RENDER_SCHEDULER: false });
  try {
    const r = await t.app.inject({ url: '/api/weblogs' });
    assert.equal(r.statusCode, 400);
    assert.match(r.json().message, /url/);
  } finally {
    await t.close();
  }
});

test('errorAnswer: an unexpected error is a 500 with a fixed message; a status outside 4xx/5xx is a 500', () => {
  assert.deepEqual(errorAnswer({ message: 'TypeError: x of undefined at /srv/pingd/src/a.ts' }, 'r1'), {
    statusCode: 500,
    error: 'Internal Server Error',
    message: 'The request failed on the server; the failure is logged under this request id.',
    requestId: 'r1',
  });
  assert.equal(errorAnswer({ message: 'odd', statusCode: 302 }, 'r2').statusCode, 500);
  assert.deepEqual(errorAnswer({ message: 'body too large', statusCode: 413, code: 'FST_ERR_CTP_BODY_TOO_LARGE' }, 'r3'), {
    statusCode: 413,
    code: 'FST_ERR_CTP_BODY_TOO_LARGE',
    error: 'Payload Too Large',
    message: 'body too large',
  });
});
