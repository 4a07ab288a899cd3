// Owns the vocabulary of a verification's outcome: what verification decides about a pinged feed, and what
// the stream's `verified` events, its `?outcome=` filter and the metrics name. Here, not in verification, so
// that push can publish the list without importing verification (imports point down the layers).

/** too_large: the document is over FETCH_MAX_BYTES; too_complex: reading it took more than its time or memory budget. */
export type Outcome =
  'verified' | 'unchanged' | 'not_modified' | 'unreachable' | 'not_a_feed' | 'gone' | 'refused' | 'too_large' | 'too_complex';

export const OUTCOMES: readonly Outcome[] = [
  'verified',
  'unchanged',
  'not_modified',
  'unreachable',
  'not_a_feed',
  'gone',
  'refused',
  'too_large',
  'too_complex',
];
