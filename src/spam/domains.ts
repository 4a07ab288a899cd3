// Owns reading a weblog URL's host as spam signals need it: the registrable domain by the public suffix
// list (tldts, with its private section: foo.blogspot.com is foo's own), and the blog platforms whose
// subdomains are each someone's blog though the list names the platform's domain as the registrable one.
import { parse } from 'tldts';

/**
 * Platforms that give every blog a subdomain but are not (or not all) in the public suffix list's private
 * section: thousands of honest weblogs under one of these are not a subdomain farm.
 */
const BLOG_PLATFORMS = new Set([
  'wordpress.com',
  'tumblr.com',
  'livejournal.com',
  'typepad.com',
  'substack.com',
  'ghost.io',
  'medium.com',
  'wixsite.com',
  'weebly.com',
  'over-blog.com',
  'hatenablog.com',
  'hateblo.jp',
  'blog.jp',
  'squarespace.com',
  'home.blog',
  'micro.blog',
  'bearblog.dev',
  'writeas.com',
  'dreamwidth.org',
  'posthaven.com',
  'svbtle.com',
]);

export interface HostParts {
  hostname: string;
  /** The registrable domain, a blog platform's subdomain counted as one (null for an IP address). */
  site: string | null;
  /** The public suffix (TLD or like): `info`, `co.uk`, `blogspot.com`. */
  suffix: string | null;
  /** The labels chosen by whoever registered the site, without the suffix: `cheap-loans`, `my.blog`. */
  ownLabels: string[];
  /** On a blog platform (its own suffix or BLOG_PLATFORMS). */
  platform: boolean;
}

export function hostParts(url: string): HostParts | null {
  const p = parse(url, { allowPrivateDomains: true });
  if (!p.hostname) return null;
  if (p.isIp || p.domain === null) return { hostname: p.hostname, site: null, suffix: null, ownLabels: [], platform: false };
  const onPlatform = BLOG_PLATFORMS.has(p.domain) && p.subdomain !== '';
  if (onPlatform) {
    const labels = p.subdomain!.split('.');
    const own = labels[labels.length - 1];
    return { hostname: p.hostname, site: `${own}.${p.domain}`, suffix: p.domain, ownLabels: labels, platform: true };
  }
  const ownLabels = [...(p.subdomain ? p.subdomain.split('.') : []), p.domainWithoutSuffix ?? ''].filter((l) => l !== '' && l !== 'www');
  return { hostname: p.hostname, site: p.domain, suffix: p.publicSuffix, ownLabels, platform: p.isPrivate === true };
}

/** The registrable domain a weblog counts under (for siblings and address bursts); the host for an IP. */
export function siteOf(url: string): string | null {
  const h = hostParts(url);
  return h === null ? null : (h.site ?? h.hostname);
}

/**
 * Feed proxies that rewrite every item's link through their own host (FeedBurner's feedproxy.google.com
 * and the like): a link through one is the weblog's own permalink, not a link to another site. Without
 * this an honest FeedBurner feed looked like a link farm (every item to one other site) and, once
 * scrapers copied its titles, like a scraper (bench/spam: 5 of the honest weblogs held on the tuning split).
 */
const FEED_PROXIES = new Set([
  'feedproxy.google.com',
  'feeds.feedburner.com',
  'feedburner.com',
  'feedblitz.com',
  'feedpress.me',
  'feeds.feedblitz.com',
]);

/** The site an item's link belongs to: the weblog's own (`ownSite`) for a link through a feed proxy. */
export function itemSite(link: string, ownSite: string | null): string | null {
  const h = hostParts(link);
  if (h === null) return null;
  if (FEED_PROXIES.has(h.hostname)) return ownSite;
  return h.site ?? h.hostname;
}
