// Owns the host of a URL as a connection needs it: the name DNS resolves, or the address literal itself,
// without the brackets a URL puts around an IPv6 literal. Safe fetching and the relay check the address
// policy on it (the other hosts of a URL are named by their role where they are kept: the politeness key
// in platform/fetch/polite.ts, a callback's host in push/websub/request.ts, the blocklist's in
// intake/abuse/blocklist.ts).

/** `url.hostname` without the brackets of an IPv6 literal: the name to resolve, or the address to check. */
export function hostToResolve(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '');
}
