// Owns lending an open database to code that closes what it is given: the same statements, locks and
// notifications, with a close() that leaves the lender's database open.
import type { Db } from './database.js';

/** `db` as a borrower sees it: everything delegates to it, except close(), which does nothing. */
export function borrowed(db: Db): Db {
  return new Proxy(db, {
    get(target, key) {
      if (key === 'close') return async () => undefined;
      const v = Reflect.get(target, key, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}
