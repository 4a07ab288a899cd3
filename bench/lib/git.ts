// Owns asking git which code a benchmark measured (the working tree is shared: results name the commit and
// any uncommitted changes under the folders that make pingd).
import { execFileSync } from 'node:child_process';

/** `git -C root …`'s trimmed output, or '' when git fails (no repository, no git). */
export function git(root: string, args: string[]): string {
  try {
    return execFileSync('git', ['-C', root, ...args], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
}
