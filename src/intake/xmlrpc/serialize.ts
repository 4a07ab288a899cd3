// Owns writing XML-RPC responses. The ping reply's bytes are fixed by what clients match on: Ghost looks
// for `<member><name>flerror</name><value><boolean>0</boolean></value></member>` with no whitespace, and
// plugins grep the message for "Thanks for the ping.".
import { escapeXml } from '../../platform/xml/escape.js';

export type OutValue = string | number | boolean | OutValue[] | { [k: string]: OutValue };

const HEAD = '<?xml version="1.0"?>\n<methodResponse><params><param><value>';
const TAIL = '</value></param></params></methodResponse>\n';

function value(v: OutValue): string {
  if (typeof v === 'string') return `<string>${escapeXml(v)}</string>`;
  if (typeof v === 'boolean') return `<boolean>${v ? 1 : 0}</boolean>`;
  if (typeof v === 'number') return Number.isInteger(v) ? `<int>${v}</int>` : `<double>${v}</double>`;
  if (Array.isArray(v)) return `<array><data>${v.map((x) => `<value>${value(x)}</value>`).join('')}</data></array>`;
  return `<struct>${Object.entries(v)
    .map(([k, x]) => `<member><name>${escapeXml(k)}</name><value>${value(x)}</value></member>`)
    .join('')}</struct>`;
}

export function responseXml(v: OutValue): string {
  return HEAD + value(v) + TAIL;
}

/** The weblogUpdates reply: {flerror, message}, flerror first. */
export function pingResponseXml(flerror: boolean, message: string): string {
  return responseXml({ flerror, message });
}

export function faultXml(faultCode: number, faultString: string): string {
  return `<?xml version="1.0"?>\n<methodResponse><fault><value>${value({ faultCode, faultString })}</value></fault></methodResponse>\n`;
}
