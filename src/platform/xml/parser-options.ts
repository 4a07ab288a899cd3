// Owns the fast-xml-parser options every parser of untrusted XML in pingd starts from: declarations and
// processing instructions dropped, every value kept as the string that was sent ("007" stays "007"), and
// entities decoded exactly once (numeric references included). Each parser adds its own shape options.
import type { X2jOptions } from 'fast-xml-parser';

export const UNTRUSTED_XML: Readonly<Partial<X2jOptions>> = Object.freeze({
  ignoreDeclaration: true,
  ignorePiTags: true,
  parseTagValue: false,
  parseAttributeValue: false,
  htmlEntities: true,
  processEntities: true,
});
