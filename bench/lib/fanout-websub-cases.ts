// Owns the hardening benchmark's fan-out cases about the websub: (filled in by the work on bounded fan-out).
import type { FeedCase } from './feed-hardening-cases.js';

export const WEBSUB_CASES: FeedCase[] = [];
