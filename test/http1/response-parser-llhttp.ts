/**
 * Two readers of one upstream answer, reduced to the same outcome so a test can compare them: llhttp
 * (Node's own HTTP/1.1 parser, the binding `node:http`'s client runs, with the client's strict
 * defaults and its answers to the parser: skip the body of a HEAD answer, a 304 and an interim 1xx;
 * treat a 101 as an upgrade) and svcproxy's `ResponseParser`. Each is fed the bytes of the answer to
 * one request in the reads given, then the connection's end. The outcome is the final (non-1xx)
 * answer's status, fields, body and trailers and the offset where it ends, or a rejection. The
 * binding is Node's internal one (`_http_common`'s `HTTPParser`); the oracle test checks this reading
 * against `http.request` over real sockets, so a change in that internal interface fails loudly
 * instead of comparing against nothing.
 */
import { createRequire } from 'node:module';
import { ResponseParser, type HeaderMap } from '../../src/http1/response-parser.js';

export type Verdict = 'complete' | 'rejected' | 'upgrade' | 'incomplete';

export interface Outcome {
  verdict: Verdict;
  status?: number;
  headers?: HeaderMap;
  /** The body as latin1 text (one character per byte). */
  body: string;
  trailers?: HeaderMap | undefined;
  /** Offset in the wire just past the final answer. */
  end?: number;
  /** Why it was rejected (llhttp's code and reason, or our message). */
  reason?: string;
}

/** The fields of one head in `HeaderMap` shape: names lower-cased, repeats as a list in order. */
export function headerMap(raw: readonly string[]): HeaderMap {
  const out: HeaderMap = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    // svcproxy drops this name (a plain object cannot hold it as data); so does the comparison.
    if (name === '__proto__') continue;
    const value = raw[i + 1]!;
    const prior = out[name];
    if (prior === undefined) out[name] = value;
    else if (Array.isArray(prior)) prior.push(value);
    else out[name] = [prior, value];
  }
  return out;
}

interface Binding {
  new (): BindingParser;
  RESPONSE: number;
  kOnHeaders: number;
  kOnHeadersComplete: number;
  kOnBody: number;
  kOnMessageComplete: number;
  kLenientNone: number;
}
interface BindingParser {
  initialize(type: number, resource: object, maxHeaderSize: number, lenient: number): void;
  execute(data: Buffer): number | Error;
  finish(): Error | undefined;
  close(): void;
  [callback: number]: unknown;
}

const { HTTPParser } = createRequire(import.meta.url)('_http_common') as { HTTPParser: Binding };

/** How llhttp, driven as `node:http`'s client drives it, reads `reads` followed by the connection's end. */
export function llhttpReads(reads: readonly Buffer[], opts: { head: boolean; maxHeaderSize: number }): Outcome {
  const parser = new HTTPParser();
  parser.initialize(HTTPParser.RESPONSE, {}, opts.maxHeaderSize, HTTPParser.kLenientNone);
  const out: Outcome = { verdict: 'incomplete', body: '' };
  let pending: string[] = [];
  let final = false;
  let interim = false;
  let done = false;
  let offset = 0;
  let readLength = 0;
  parser[HTTPParser.kOnHeaders] = (headers: string[]) => {
    pending.push(...headers);
  };
  parser[HTTPParser.kOnHeadersComplete] = (
    _major: number, _minor: number, headers: string[] | undefined, _method: unknown, _url: unknown,
    status: number, _message: string, upgrade: boolean,
  ): number => {
    const fields = headers ?? pending;
    pending = [];
    if (done) return 1;
    if (upgrade) {
      out.verdict = 'upgrade';
      out.status = status;
      done = true;
      return 2;
    }
    // As node:http's client: a 1xx other than 101 is interim; a 101 without `Connection: upgrade`
    // is taken as the answer.
    if (status >= 100 && status < 200 && status !== 101) {
      interim = true;
      return 1;
    }
    interim = false;
    final = true;
    out.status = status;
    out.headers = headerMap(fields);
    return opts.head || status === 304 ? 1 : 0;
  };
  parser[HTTPParser.kOnBody] = (chunk: Buffer) => {
    if (final && !done) out.body += chunk.toString('latin1');
  };
  parser[HTTPParser.kOnMessageComplete] = () => {
    if (interim || done || !final) return;
    // Fields flushed after the head are the trailers of a chunked body.
    if (pending.length > 0) out.trailers = headerMap(pending);
    pending = [];
    done = true;
    out.verdict = 'complete';
    // Exact only when the read that completed the answer ended with it (one byte at a time).
    out.end = offset + readLength;
  };
  try {
    for (const read of reads) {
      readLength = read.length;
      const result = parser.execute(read);
      if (done) break;
      if (result instanceof Error) {
        const e = result as Error & { code?: string; reason?: string };
        return { verdict: 'rejected', body: out.body, reason: `${e.code} ${e.reason ?? e.message}` };
      }
      offset += read.length;
    }
    if (!done) {
      readLength = 0;
      const result = parser.finish();
      if (result instanceof Error) {
        const e = result as Error & { code?: string; reason?: string };
        return { verdict: 'rejected', body: out.body, reason: `${e.code} ${e.reason ?? e.message}` };
      }
    }
  } finally {
    parser.close();
  }
  if (out.verdict === 'incomplete') return { verdict: 'rejected', body: out.body, reason: 'cut short by the end' };
  return out;
}

/** How svcproxy's parser reads `reads` (the answer to one request) followed by the connection's end. */
export function oursReads(reads: readonly Buffer[], opts: { head: boolean; maxHeaderSize: number }): Outcome {
  const parser = new ResponseParser(opts.maxHeaderSize);
  const out: Outcome = { verdict: 'incomplete', body: '' };
  let offset = 0;
  let readLength = 0;
  parser.expect({
    onHead(status, headers) {
      out.status = status;
      out.headers = headers;
    },
    onBody(chunk) {
      out.body += chunk.toString('latin1');
    },
    onComplete(trailers) {
      out.verdict = 'complete';
      out.trailers = trailers;
      out.end = offset + readLength - parser.trailingBytes;
    },
  }, opts.head);
  for (const read of reads) {
    readLength = read.length;
    const error = parser.execute(read);
    if (error) return { verdict: 'rejected', body: out.body, reason: error.message };
    // The answer is complete: what follows in later reads is the next request's business.
    if (out.verdict === 'complete') break;
    offset += read.length;
    // The connection lends the buffer it reads into; a kept partial head must not alias it.
    parser.ownPending();
  }
  if (out.verdict !== 'complete') {
    readLength = 0;
    const error = parser.finish();
    if (error) return { verdict: 'rejected', body: out.body, reason: error.message };
  }
  return out;
}

/** `wire` cut at `points` (ascending offsets inside it) into reads. */
export function splitAt(wire: Buffer, points: readonly number[]): Buffer[] {
  const reads: Buffer[] = [];
  let from = 0;
  for (const p of points) {
    if (p > from && p < wire.length) {
      reads.push(wire.subarray(from, p));
      from = p;
    }
  }
  reads.push(wire.subarray(from));
  return reads;
}

/** One read per byte. */
export function bytewise(wire: Buffer): Buffer[] {
  return Array.from({ length: wire.length }, (_, i) => wire.subarray(i, i + 1));
}
