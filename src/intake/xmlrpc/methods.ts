// Owns the XML-RPC methods we answer: weblogUpdates.ping / extendedPing (RSS Feed State, "XML-RPC Ping") and
// the system.* introspection methods. Maps parameters onto a RawPing; the ping service decides the rest.
import type { RawPing } from '../ping/validate.js';
import { FAULT, XmlRpcFault, asString, type XmlRpcValue } from './parse.js';
import type { OutValue } from './serialize.js';
import type { XmlRpcMethodTable } from './method-table.js';

interface MethodInfo {
  help: string;
  signatures: string[][];
}

export const METHODS: Record<string, MethodInfo> = {
  'weblogUpdates.ping': {
    help: 'weblogUpdates.ping(name, url[, changesUrl[, category]]): tell us the weblog at url has changed. Returns {flerror, message}.',
    signatures: [
      ['struct', 'string', 'string'],
      ['struct', 'string', 'string', 'string'],
      ['struct', 'string', 'string', 'string', 'string'],
    ],
  },
  'weblogUpdates.extendedPing': {
    help:
      'weblogUpdates.extendedPing(name, url, changesUrl, rssUrl[, tags]) or, as WordPress sends it, extendedPing(name, url, rssUrl). ' +
      'tags is a |-delimited list. Empty parameters mean absent. Returns {flerror, message}.',
    signatures: [
      ['struct', 'string', 'string', 'string'],
      ['struct', 'string', 'string', 'string', 'string'],
      ['struct', 'string', 'string', 'string', 'string', 'string'],
    ],
  },
  'system.listMethods': { help: 'Lists the methods this server answers.', signatures: [['array']] },
  'system.methodHelp': { help: 'Describes a method.', signatures: [['string', 'string']] },
  'system.methodSignature': { help: 'Lists the signatures of a method.', signatures: [['array', 'string']] },
};

const PARAM_NAMES = ['name', 'url', 'changesUrl', 'rssUrl', 'tags'];

function stringParam(params: XmlRpcValue[], i: number, label: string): string | null {
  const s = asString(params[i]);
  if (s === undefined) throw new XmlRpcFault(FAULT.INVALID_PARAMS, `Invalid params: parameter ${i + 1} (${label}) must be a string.`);
  // Empty means absent (Serendipity sends '' for the changes URL).
  return s === null || s.trim() === '' ? null : s;
}

function arity(method: string, params: XmlRpcValue[], min: number, max: number): void {
  if (params.length < min || params.length > max) {
    const want = min === max ? `${min}` : `${min} to ${max}`;
    throw new XmlRpcFault(FAULT.INVALID_PARAMS, `Invalid params: ${method} takes ${want} parameters, got ${params.length}.`);
  }
}

/**
 * Reads a weblogUpdates call into a RawPing.
 * - ping(name, url[, changesUrl[, category]]): weblogs.com's API allowed the two optional ones; a category
 *   is kept as a tag.
 * - extendedPing: 3 params = (name, url, rssUrl), the form WordPress sends; 4 = (name, url, changesUrl,
 *   rssUrl); 5 = the same plus a |-delimited tag list (RSS Feed State). 2 params = a plain ping.
 */
export function pingFromCall(methodName: string, params: XmlRpcValue[]): RawPing {
  const extended = methodName === 'weblogUpdates.extendedPing';
  if (extended) arity(methodName, params, 2, 5);
  else arity(methodName, params, 2, 4);
  const s = params.map((_, i) => stringParam(params, i, PARAM_NAMES[i] ?? `param ${i + 1}`));
  if (!extended) {
    return { method: 'ping', name: s[0], url: s[1], changesUrl: s[2] ?? null, tags: s[3] ?? null };
  }
  if (params.length === 3) return { method: 'extendedPing', name: s[0], url: s[1], rssUrl: s[2] };
  return { method: 'extendedPing', name: s[0], url: s[1], changesUrl: s[2] ?? null, rssUrl: s[3] ?? null, tags: s[4] ?? null };
}

/** The system.* methods; `extra` adds the methods other plugins answer (method-table.ts). */
export function systemCall(methodName: string, params: XmlRpcValue[], extra?: XmlRpcMethodTable): OutValue {
  switch (methodName) {
    case 'system.listMethods':
      return [...Object.keys(METHODS), ...(extra?.names() ?? [])];
    case 'system.methodHelp':
    case 'system.methodSignature': {
      arity(methodName, params, 1, 1);
      const name = asString(params[0]);
      // Own keys only: METHODS['constructor'] is Object's constructor, which made methodHelp('constructor') an internal error.
      const info = name && Object.hasOwn(METHODS, name) ? METHODS[name] : name ? extra?.get(name) : undefined;
      if (!info)
        throw new XmlRpcFault(FAULT.INVALID_PARAMS, `Invalid params: no method named ${JSON.stringify(String(name ?? '')).slice(0, 140)}.`);
      return methodName === 'system.methodHelp' ? info.help : info.signatures;
    }
  }
  throw new XmlRpcFault(FAULT.METHOD_NOT_FOUND, `Method not found: ${methodName.slice(0, 128)}.`);
}
