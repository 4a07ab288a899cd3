// Owns the Node HTTP server under Fastify: the server Fastify would make itself (same options, same
// timeouts), plus early answers: a few exact GET/HEAD URLs whose cheapest answer (a 304 to a poll naming
// the current ETag) is written before Fastify sees the request, and paths whose refusal is (a /stream
// beyond STREAM_MAX_CLIENTS). Everything else goes to Fastify. Also the check, before start-up's slow work,
// that PORT can be listened on at all.
//
// Why: measured with wrk at 64 connections (bench/results/evidence/2026-11-23-wrk-3.md), a 304 from pingd's polled
// route ran at 0.76x a bare Fastify 304. Per request pingd's own work was ~5 us; the rest of a Fastify
// request (its request and reply objects, routing, the reply's header handling) was the same in both. A poll
// answered here costs the validator compare, the pre-built head and the metrics.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import net from 'node:net';
import type { FastifyServerFactory } from 'fastify';
import { REQUEST_ID_HEADER } from './request-id.js';

export interface EarlyAnswer {
  /** The status, head and body (none when absent) to answer with, or null to let Fastify answer. */
  decide(req: IncomingMessage): { status: number; head: Readonly<Record<string, string>>; body?: string } | null;
  /** Called once the answer is written (metrics), with its time in ms. */
  answered?(req: IncomingMessage, status: number, ms: number): void;
}

export class EarlyAnswers {
  private readonly byUrl = new Map<string, EarlyAnswer>();
  private readonly byPath = new Map<string, EarlyAnswer>();
  /** Off while every request is logged (LOG_LEVEL=debug/trace): an early answer has no Fastify log line. */
  enabled = true;
  /** Early answers written so far. */
  written = 0;

  constructor(private readonly requestId: (req: IncomingMessage) => string) {}

  /** Answers GET and HEAD of exactly `url` (no query string) when `answer` decides to. */
  add(url: string, answer: EarlyAnswer): void {
    if (this.byUrl.has(url)) throw new Error(`an early answer for ${url} exists`);
    this.byUrl.set(url, answer);
  }

  /** Answers GET and HEAD of `path` with any query string when `answer` decides to (it reads the query itself). */
  addPath(path: string, answer: EarlyAnswer): void {
    if (this.byPath.has(path)) throw new Error(`an early answer for ${path} exists`);
    this.byPath.set(path, answer);
  }

  /** Writes the early answer to `req` and returns true, or returns false (Fastify answers). */
  answer(req: IncomingMessage, res: ServerResponse): boolean {
    if (!this.enabled || (req.method !== 'GET' && req.method !== 'HEAD')) return false;
    const url = req.url as string;
    let a = this.byUrl.get(url);
    if (a === undefined && this.byPath.size > 0) {
      const q = url.indexOf('?');
      a = this.byPath.get(q < 0 ? url : url.slice(0, q));
    }
    if (a === undefined) return false;
    const started = performance.now();
    const d = a.decide(req);
    if (d === null) return false;
    // One object to writeHead and no setHeader before it: after a setHeader, writeHead takes Node's slow
    // path and stores every header again one by one (2.1 µs of a 29 µs 304 in a wrk profile on this
    // machine, against nothing in bare Fastify's 304, which calls writeHead alone).
    res.writeHead(d.status, { ...d.head, [REQUEST_ID_HEADER]: this.requestId(req) });
    res.end(d.body);
    this.written++;
    a.answered?.(req, d.status, performance.now() - started);
    return true;
  }
}

/** Fastify's serverFactory: its own HTTP/1.1 server (fastify/lib/server.js), early answers first. */
export function httpServerFactory(early: EarlyAnswers): FastifyServerFactory {
  return (handler, options) => {
    const opts = options as {
      http?: http.ServerOptions;
      keepAliveTimeout: number;
      requestTimeout: number;
      connectionTimeout?: number;
      maxRequestsPerSocket?: number;
    };
    const receiving = new Set<http.IncomingMessage>();
    const server = http.createServer(opts.http ?? {}, (req, res) => {
      // Requests whose body is still arriving, so a shutdown can close those that trickle (below). Only a
      // request with Content-Length or Transfer-Encoding has a body (RFC 9112 §6.3); the others (GETs, polls)
      // are not complete yet when they are handed over, and tracking them cost two listeners each.
      if (!req.complete && (req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined)) {
        receiving.add(req);
        const done = () => receiving.delete(req);
        req.once('end', done);
        res.once('close', done);
      }
      if (!early.answer(req, res)) handler(req, res);
    });
    RECEIVING.set(server, receiving);
    // What Fastify sets on the server it makes (its defaults are filled in before this is called).
    server.keepAliveTimeout = opts.keepAliveTimeout;
    server.requestTimeout = opts.requestTimeout;
    server.setTimeout(opts.connectionTimeout ?? 0);
    if (opts.maxRequestsPerSocket) server.maxRequestsPerSocket = opts.maxRequestsPerSocket;
    return server;
  };
}

const RECEIVING = new WeakMap<http.Server, Set<http.IncomingMessage>>();

/**
 * At shutdown: the requests still sending their body `graceMs` from now are cut off (their sockets
 * destroyed). Nothing was acknowledged for them, so nothing is lost: their clients see a closed connection
 * and send again. Without it one client trickling a body holds the server open until REQUEST_TIMEOUT_MS
 * (30 s), past SHUTDOWN_TIMEOUT_MS (25 s), and every graceful shutdown ends in "shutdown took too long".
 * Returns the number cut off (for the log line).
 */
export function closeTricklingRequests(server: http.Server, graceMs: number): Promise<number> {
  const receiving = RECEIVING.get(server);
  if (!receiving || receiving.size === 0) return Promise.resolve(0);
  return new Promise((resolve) => {
    const t = setTimeout(() => {
      let n = 0;
      for (const req of receiving) {
        if (req.complete) continue;
        req.socket.destroy();
        n++;
      }
      receiving.clear();
      resolve(n);
    }, graceMs);
    t.unref();
  });
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Early answers of this app's HTTP server (routes add theirs when they are declared). */
    earlyAnswers: EarlyAnswers;
  }
}

/**
 * Refuses at once when PORT cannot be listened on at HOST (taken, or privileged), naming the setting:
 * checked before start-up's slow work, so a first start does not create its database to fail afterwards.
 * A probe listen that is closed again; the real listen follows (a port taken in between still fails there).
 */
export async function assertPortFree(port: number, host: string): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE')
        reject(new Error(`PORT ${port} is already in use on ${host}: stop what listens there, or set PORT (or HOST) to another value`));
      else if (err.code === 'EACCES')
        reject(new Error(`PORT ${port} on ${host} needs privileges this process does not have: set PORT to 1024 or above`));
      else if (err.code === 'EADDRNOTAVAIL')
        reject(new Error(`HOST ${host} is not an address of this machine: set HOST to one of its addresses, or 0.0.0.0 for all`));
      else reject(new Error(`cannot listen on PORT ${port} at HOST ${host}: ${err.message}`));
    });
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
}
