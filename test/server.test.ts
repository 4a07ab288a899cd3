// The process-level settings `pingd serve` applies before it builds the app.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EMBEDDED_HEAP_GROWTH_PERCENT, heapGrowthPercent } from '../src/server.js';
import { ConfigError, loadConfig } from '../src/platform/config.js';

test('heap growth: 20% on the embedded database, V8 own on PostgreSQL, unless HEAP_GROWTH_PERCENT says', () => {
  const embedded = loadConfig({});
  const postgres = loadConfig({ DATABASE_URL: 'postgres://u@127.0.0.1:5432/db' });
  assert.equal(embedded.HEAP_GROWTH_PERCENT, undefined);
  assert.equal(heapGrowthPercent(embedded), EMBEDDED_HEAP_GROWTH_PERCENT);
  assert.equal(EMBEDDED_HEAP_GROWTH_PERCENT, 20);
  assert.equal(heapGrowthPercent(postgres), 0);
  assert.equal(heapGrowthPercent(loadConfig({ HEAP_GROWTH_PERCENT: '50', DATABASE_URL: 'postgres://u@127.0.0.1:5432/db' })), 50);
  assert.equal(heapGrowthPercent(loadConfig({ HEAP_GROWTH_PERCENT: '0' })), 0);
  assert.equal(heapGrowthPercent(loadConfig({ HEAP_GROWTH_PERCENT: ' ' })), 20);
});

test('HEAP_GROWTH_PERCENT refuses what is not a percentage it can use', () => {
  assert.throws(
    () => loadConfig({ HEAP_GROWTH_PERCENT: '-5' }),
    (e: Error) => e instanceof ConfigError && e.message === 'HEAP_GROWTH_PERCENT must be between 0 and 1000, got -5',
  );
  assert.throws(
    () => loadConfig({ HEAP_GROWTH_PERCENT: '20%' }),
    (e: Error) => e instanceof ConfigError && e.message === 'HEAP_GROWTH_PERCENT must be an integer, got "20%"',
  );
});
