// Owns the hardening benchmark's fan-out cases about the relay: (filled in by the work on bounded fan-out).
import type { FeedCase } from './feed-hardening-cases.js';

export const RELAY_CASES: FeedCase[] = [];
