// Request ids made by a counter after a random per-process prefix: unique within a process and across
// instances, shaped as before (36 characters of hex and dashes), a trusted proxy's id kept.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { requestIdGenerator, requestIdSource } from '../../src/platform/request-id.js';

const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const req = (headers: Record<string, string> = {}) => ({ headers }) as unknown as IncomingMessage;

test('request ids are unique within a process and across instances (each draws its own prefix)', () => {
  const a = requestIdSource();
  const b = requestIdSource();
  const seen = new Set<string>();
  for (let i = 0; i < 50_000; i++) {
    for (const id of [a(), b()]) {
      assert.match(id, ID);
      assert.ok(!seen.has(id), id);
      seen.add(id);
    }
  }
  assert.notEqual(a().slice(0, 24), b().slice(0, 24), 'two instances, two prefixes');
});

test('a proxy id is kept only when trusted and safe; otherwise the next id of the process', () => {
  const trusted = requestIdGenerator(true);
  const untrusted = requestIdGenerator(false);
  assert.equal(trusted(req({ 'x-request-id': 'lb-7f3a9c' })), 'lb-7f3a9c');
  assert.match(untrusted(req({ 'x-request-id': 'lb-7f3a9c' })), ID);
  assert.match(trusted(req({ 'x-request-id': 'a b<script>' })), ID);
});
