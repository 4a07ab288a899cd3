// Owns masking secrets in what pingd prints: a URL's user and password and secret-looking query parameters.
// A utility: it imports nothing from the domain layers.

export function redactUrl(raw: string): string {
  try {
    const u = new URL(raw);
    // The user too: services put API keys there (https://KEY@host/), and a user name helps an attacker.
    if (u.username) u.username = 'redacted';
    if (u.password) u.password = 'redacted';
    // Query parameters such as ?password= or ?sslkey= carry secrets too.
    for (const name of [...u.searchParams.keys()])
      if (/pass|secret|key|token|auth|sig|cred/i.test(name)) u.searchParams.set(name, 'redacted');
    return u.href;
  } catch {
    return '[unparseable URL]';
  }
}
