// Owns the URL family of spam signals: what a weblog's URL and name say before anything is fetched. Splog
// hosts are keyword phrases glued or hyphenated into a name (Salvetti & Nicolov: URL n-grams alone gave 93%
// precision at 51% recall), on cheap TLDs, often with digits. Costs tens of microseconds, nearly all of it the
// word segmentation (bench/spam: 69 µs per call over the corpus's hosts and names, 11 µs over short ones):
// once per weblog, not per ping.
import WordsNinja from 'wordsninja';
import type { Reason, WeblogEvidence } from './verdict.js';
import { hostParts } from './domains.js';

/**
 * Words splogs are made of (commerce, pharmacy, gambling, finance, adult, SEO), from the published splog
 * studies' examples and the blocklists ping servers kept. A word here in an honest blog's name costs it a
 * little; two or more, or one glued into a host with others, is what splogs look like.
 */
const SPAM_WORDS = new Set(
  (
    'casino casinos poker slots slot betting bet bets gamble gambling lottery jackpot roulette blackjack ' +
    'loan loans payday mortgage mortgages refinance credit debt cash insurance quotes quote forex trading bitcoin crypto ' +
    'viagra cialis levitra pharmacy pharma pills pill meds drugs tramadol xanax valium phentermine steroids ' +
    'replica replicas cheap discount discounts deal deals coupon coupons promo sale outlet wholesale buy ' +
    'seo backlink backlinks traffic ranking rank affiliate ' +
    'porn xxx sex sexy adult escort escorts dating webcam nude ' +
    'diet weightloss slimming fat burner supplement supplements enlargement ' +
    'download downloads crack keygen torrent serial warez free freebies earn income rich money'
  ).split(' '),
);

/** TLDs where most registrations seen in splog studies were (the .info-heavy mix) and today's cheapest. */
const CHEAP_TLDS = new Set(
  'info biz xyz top click loan win bid icu club online site work live space website store shop fun gq tk ml cf ga cn ru pw cc ws su'.split(
    ' ',
  ),
);

let ninja: { splitSentence(s: string): string[] } | undefined;
/** wordsninja's dictionary (English words by frequency) loads once, on first use (~40 ms). */
function splitter(): { splitSentence(s: string): string[] } {
  if (ninja === undefined) {
    const n = new WordsNinja();
    void n.loadDictionary(); // synchronous underneath: the promise resolves with the table already built
    ninja = n;
    return n;
  }
  return ninja;
}

/** The words a label is made of: hyphens and digits split it, and each glued run is segmented. */
export function labelWords(label: string): string[] {
  const out: string[] = [];
  for (const run of label.toLowerCase().split(/[^a-z]+/)) {
    if (run.length === 0) continue;
    // Below 6 letters a run is one word or a name ("jim", "tech"), and segmenting it finds noise.
    if (run.length < 6) out.push(run);
    else
      out.push(
        ...splitter()
          .splitSentence(run)
          .map((w) => w.toLowerCase()),
      );
  }
  return out;
}

export function urlReasons(e: WeblogEvidence): Reason[] {
  const h = hostParts(e.url);
  if (h === null) return [];
  const reasons: Reason[] = [];
  const hostWords = h.ownLabels.flatMap(labelWords);
  const nameWords = e.name ? labelWords(e.name.slice(0, 200)) : [];
  const hostHits = new Set(hostWords.filter((w) => SPAM_WORDS.has(w)));
  const nameHits = new Set(nameWords.filter((w) => SPAM_WORDS.has(w)));
  const hits = new Set([...hostHits, ...nameHits]);
  if (hits.size > 0) {
    const weight = Math.min(0.45, 0.12 * hostHits.size + 0.06 * nameHits.size + (hits.size >= 2 ? 0.1 : 0));
    reasons.push({
      family: 'url',
      code: 'url.keywords',
      weight: Math.round(weight * 100) / 100,
      text: `its address or name is made of words splogs use: ${[...hits].slice(0, 5).join(', ')}`,
    });
  }
  const longest = h.ownLabels.reduce((a, l) => (l.length > a.length ? l : a), '');
  const gluedWords = /[^a-z]/.test(longest) ? 0 : labelWords(longest).length;
  if (gluedWords >= 3) {
    reasons.push({
      family: 'url',
      code: 'url.glued',
      weight: gluedWords >= 4 ? 0.2 : 0.1,
      text: `its host name glues ${gluedWords} words together (${longest})`,
    });
  }
  const hyphens = Math.max(0, ...h.ownLabels.map((l) => l.split('-').length - 1));
  if (hyphens >= 2) {
    reasons.push({
      family: 'url',
      code: 'url.hyphens',
      weight: hyphens >= 3 ? 0.2 : 0.1,
      text: `its host name strings ${hyphens + 1} words with hyphens`,
    });
  }
  const digits = h.ownLabels.join('').replace(/[^0-9]/g, '').length;
  if (digits >= 3) reasons.push({ family: 'url', code: 'url.digits', weight: 0.1, text: `its host name carries ${digits} digits` });
  if (h.hostname.length > 40)
    reasons.push({ family: 'url', code: 'url.long_host', weight: 0.1, text: `its host name is ${h.hostname.length} characters long` });
  const tld = h.suffix?.split('.').pop();
  if (tld !== undefined && CHEAP_TLDS.has(tld) && !h.platform) {
    reasons.push({ family: 'url', code: 'url.tld', weight: 0.1, text: `it is under .${tld}, where most splogs were registered` });
  }
  return reasons;
}
