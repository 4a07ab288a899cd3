// Owns how pingd introduces itself to other servers (the aggregator-behaviour guide: "ProgramName/version" plus a page a
// sysadmin can read before deciding to block us): `pingd/<version> (+<url>)`.
import { readFileSync } from 'node:fs';

interface PackageInfo {
  version: string;
  homepage?: string;
  repository?: string | { url?: string };
}

function packageInfo(): PackageInfo {
  try {
    return JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as PackageInfo;
  } catch {
    return { version: '0.0.0' };
  }
}

const PKG = packageInfo();

export const PINGD_VERSION = PKG.version;

/** The project page from package.json (homepage, else repository), if it names one. */
export function projectUrl(): string | undefined {
  if (PKG.homepage) return PKG.homepage;
  const repo = typeof PKG.repository === 'string' ? PKG.repository : PKG.repository?.url;
  return repo ? repo.replace(/^git\+/, '').replace(/\.git$/, '') : undefined;
}

/**
 * `pingd/<version> (+<contactUrl>)`: the operator's page when configured (FETCH_CONTACT_URL), else the
 * project's; without either, the product token alone.
 */
export function userAgent(contactUrl?: string): string {
  const url = contactUrl ?? projectUrl();
  return url ? `pingd/${PINGD_VERSION} (+${url})` : `pingd/${PINGD_VERSION}`;
}
