// Owns the XML-RPC methods other plugins answer on POST /RPC2 besides weblogUpdates.* and system.* (rssCloud's
// rssCloud.ping and rssCloud.pleaseNotify): a table per app (`app.xmlrpcMethods`) that a plugin adds to
// when it starts and the endpoint reads at each call, so intake never imports the features that answer them.
import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { XmlRpcValue } from './values.js';
import type { OutValue } from './serialize.js';

export interface ExtraMethod {
  /** system.methodHelp's answer. */
  help: string;
  /** system.methodSignature's answer: the return type, then the parameters' types. */
  signatures: string[][];
  /** The method's value; an XmlRpcFault it throws is answered as that fault. */
  call(params: XmlRpcValue[], req: FastifyRequest): Promise<OutValue>;
}

export class XmlRpcMethodTable {
  private readonly methods = new Map<string, ExtraMethod>();

  add(name: string, m: ExtraMethod): void {
    if (this.methods.has(name)) throw new Error(`XML-RPC method ${name} is already answered`);
    this.methods.set(name, m);
  }

  get(name: string): ExtraMethod | undefined {
    return this.methods.get(name);
  }

  names(): string[] {
    return [...this.methods.keys()];
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    xmlrpcMethods: XmlRpcMethodTable;
  }
}

async function xmlrpcMethodsPlugin(app: FastifyInstance): Promise<void> {
  app.decorate('xmlrpcMethods', new XmlRpcMethodTable());
}

export default fp(xmlrpcMethodsPlugin, { name: 'xmlrpc-methods' });
