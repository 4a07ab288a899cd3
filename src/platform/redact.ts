// Owns masking secrets in what pingd prints: a URL's user and password and secret-looking query parameters.
// A utility: it imports nothing from the domain layers.

export function redactUrl(raw: string): string {
  // A host list (libpq's `postgres://u:p@h1:5432,h2:5433/db`) is no URL to new URL(): it stands aside while
  // the rest is redacted, then goes back.
  const list = /^([a-z][\w+.-]*:\/\/(?:[^/?#]*@)?)([^/?#@,]*(?:,[^/?#@,]*)+)(?=[/?#]|$)/i.exec(raw);
  const STAND_IN = 'host-list.invalid';
  try {
    const u = new URL(list ? `${list[1]}${STAND_IN}${raw.slice(list[0].length)}` : raw);
    // The user too: services put API keys there (https://KEY@host/), and a user name helps an attacker.
    if (u.username) u.username = 'redacted';
    if (u.password) u.password = 'redacted';
    // Query parameters such as ?password= or ?sslkey= carry secrets too.
    for (const name of [...u.searchParams.keys()])
      if (/pass|secret|key|token|auth|sig|cred/i.test(name)) u.searchParams.set(name, 'redacted');
    return list ? u.href.replace(STAND_IN, list[2]) : u.href;
  } catch {
    return '[unparseable URL]';
  }
}
