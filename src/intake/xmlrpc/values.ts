// Owns the shape of a parsed XML-RPC call (https://xmlrpc.com/spec.md): a method name and typed values,
// shared by the full parser and the fast scanner.

export type XmlRpcValue =
  | { type: 'string'; value: string }
  | { type: 'base64'; value: Buffer }
  | { type: 'int'; value: number }
  | { type: 'boolean'; value: boolean }
  | { type: 'double'; value: number }
  | { type: 'dateTime'; value: string }
  | { type: 'nil' }
  | { type: 'array'; value: XmlRpcValue[] }
  | { type: 'struct'; value: Map<string, XmlRpcValue> };

export interface MethodCall {
  methodName: string;
  params: XmlRpcValue[];
}
