// Owns `pingd spam`: what the spam filter thinks of the weblogs (list, show) and the operator's pins that
// overrule it (allow: never held; deny: always held under SPAM_FILTER=hold; clear: the score decides again).
// A pin that lists or unlists a weblog moves the listings' watermark and renders its documents again, as
// `pingd weblogs remove|restore` does (weblogs-command.ts), with the same code and lock.
import type { Config } from '../../platform/config.js';
import { type CommandDeps, schemaBehind } from '../../platform/command-deps.js';
import { normalizeUrl, PingValidationError } from '../../intake/ping/validate.js';
import { weblogRemoval } from '../../intake/abuse/removal-repository.js';
import { listSpam, pinWeblog, spamJson, spamOfWeblog, type SpamPin, type WeblogSpam } from '../../spam/spam-repository.js';
import { scoreWeblog } from '../../spam/score.js';
import { urlOnlyEvidence } from '../../spam/verdict.js';
import { touchWatermark, WEBLOG_REMOVALS_WATERMARK } from '../rendering-repository.js';
import { renderAgain } from './weblogs-command.js';

export const SPAM_OPTIONS = { held: { type: 'boolean' }, json: { type: 'boolean' }, limit: { type: 'string' } } as const;

export const SPAM_USAGE = `pingd spam list [--held] [--json] [--limit N]
pingd spam show URL [--json]
pingd spam allow URL | pingd spam deny URL | pingd spam clear URL

  list     scored weblogs, highest score first (--held: only those held now; --limit: at most N, default 100)
  show     a weblog's score, whether it is held, its pin and the reasons in words
  allow    pin the weblog as not spam: never held, whatever its score
  deny     pin the weblog as spam: held under SPAM_FILTER=hold, whatever its score
  clear    remove the pin: its score decides again

A pin that lists or unlists the weblog renders the live documents and the archives of its pings again.
Exit codes: 0 done, 1 not found or failed, 2 usage error, 75 the render lock stayed busy (the pin is stored).`;

type Deps = CommandDeps<'OK' | 'FAILURE' | 'USAGE' | 'BUSY'>;

const PIN: Readonly<Record<string, SpamPin | null>> = { allow: 'allow', deny: 'deny', clear: null };

/** One line of `pingd spam list`: score, held or not, the pin, the URL. */
const line = (s: WeblogSpam) => `${s.score.toFixed(3)}  ${s.held ? 'held' : '-   '}  ${(s.pinned ?? '-').padEnd(5)}  ${s.url}`;

export async function spamCommand(values: Record<string, unknown>, positionals: string[], config: Config, deps: Deps): Promise<number> {
  const { EXIT } = deps;
  const [action, raw, ...rest] = positionals;
  const usage = (why: string) => {
    deps.err(`pingd spam: ${why}\nUsage: ${SPAM_USAGE}`);
    return EXIT.USAGE;
  };
  if (action === 'list') {
    if (raw !== undefined) return usage('list takes no URL');
  } else if (action === 'show' || (action !== undefined && action in PIN)) {
    if (raw === undefined || rest.length > 0) return usage(`${action} takes one weblog URL`);
  } else return usage('name list, show, allow, deny or clear');
  const limit = values.limit === undefined ? 100 : Number(values.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100_000) return usage('--limit must be a whole number from 1 to 100000');
  let url = '';
  if (raw !== undefined) {
    try {
      url = normalizeUrl(raw);
    } catch (err) {
      if (!(err instanceof PingValidationError)) throw err;
      deps.err(`pingd spam: ${err.message}`);
      return EXIT.USAGE;
    }
  }
  const db = await deps.openDb(config);
  try {
    const behind = await schemaBehind(db, 'spam');
    if (behind) {
      deps.err(behind);
      return EXIT.FAILURE;
    }
    if (action === 'list') {
      const rows = await listSpam(db, { held: values.held === true, limit });
      if (values.json) deps.out(JSON.stringify(rows.map(spamJson), null, 2));
      else if (rows.length === 0) deps.out(values.held ? 'no weblog is held' : 'no weblog is scored');
      else for (const r of rows) deps.out(line(r));
      return EXIT.OK;
    }
    const w = await weblogRemoval(db, url);
    if (!w) {
      deps.err(`pingd spam: pingd has no ping from ${url}`);
      return EXIT.FAILURE;
    }
    if (action === 'show') {
      const s = await spamOfWeblog(db, w.weblogId);
      if (!s) {
        deps.out(`${url} is not scored (it pinged while SPAM_FILTER was off)`);
        return EXIT.OK;
      }
      if (values.json) deps.out(JSON.stringify(spamJson(s), null, 2));
      else {
        deps.out(`${url}: score ${s.score.toFixed(3)}, ${s.held ? 'held' : 'not held'}${s.pinned ? `, pinned ${s.pinned}` : ''}`);
        for (const r of s.reasons) deps.out(`  ${r.weight >= 0 ? '+' : ''}${r.weight.toFixed(2)}  ${r.text}`);
      }
      return EXIT.OK;
    }
    const pin = PIN[action];
    const rule = { hold: config.SPAM_FILTER === 'hold', threshold: config.SPAM_THRESHOLD };
    const first = scoreWeblog(urlOnlyEvidence(url, null));
    // The pin and the watermark in one transaction: a renderer that sees the one sees the other.
    const r = await db.transaction(async (tx) => {
      const out = await pinWeblog(tx, w, pin, rule, { score: first.score, reasons: JSON.stringify(first.reasons) });
      if (out.changed) await touchWatermark(tx, WEBLOG_REMOVALS_WATERMARK);
      return out;
    });
    const what = pin === null ? 'pin cleared' : `pinned ${pin}`;
    const state = r.held ? 'held: listed nowhere' : rule.hold ? 'listed' : `not held (SPAM_FILTER=${config.SPAM_FILTER} holds nothing)`;
    deps.out(`${url}: ${what}; ${state}`);
    if (!r.changed) return EXIT.OK;
    return await renderAgain(config, db, w.weblogId, deps, 'pingd spam');
  } finally {
    await db.close();
  }
}
