/**
 * HTTP/1.1 connections that serve no further request (RFC 9112 §9.6), and the answers to what Node's
 * parser rejects (400, 408, 431, 505), with the error shape of DESIGN §6 and the connection closed
 * after them: the two ways a listener ends an HTTP/1.1 connection on the client's account.
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { ERRORS, errorBody, type ErrorCode } from '../filter/index.js';

/** How long a connection that got a 400/408/431 may stay open for the client to read it. */
const ERROR_LINGER_MS = 1000;

/**
 * HTTP/1.1 connections that serve no further request (RFC 9112 §9.6). Node's server parses every
 * request pipelined in one read and emits each at once, queueing their answers; so a request the
 * proxy refuses and closes on (bad framing, two Hosts, an HTTP version it does not speak) is
 * usually followed, in the same turn, by whatever the client pipelined behind it. Once an answer
 * on a connection says `Connection: close` (or the client's request did), every later request on
 * it is dropped unanswered, upgrades and CONNECTs included, and the connection closes after the
 * answers before it.
 *
 * A head Node's parser rejects (400, 431, 408, or bytes after a request that asked to close) while
 * earlier answers are still being written waits for them: they go out whole, then the error answer
 * (none for bytes after `Connection: close`: the client said it was done), then the close. Only an
 * error inside the body of the request being answered cuts it: that request is aborted upstream
 * and, if its answer had started, the connection is destroyed without an error spliced in.
 */
export class ClosingConnections {
  private readonly sockets = new WeakSet<Duplex>();
  /** Connections whose parser failed (it may report the same failure again on the next read). */
  private readonly failed = new WeakSet<Duplex>();
  /** Each connection's latest request and its answer. */
  private readonly latest = new WeakMap<Duplex, http.ServerResponse>();

  /** True (and nothing is to be served) when the request's connection is closing. */
  refuses(req: http.IncomingMessage): boolean {
    return this.sockets.has(req.socket);
  }

  /** After the handler ran: an answer that closes the connection closes it to later requests. */
  after(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.latest.set(req.socket, res);
    if (!res.shouldKeepAlive || (res as http.ServerResponse & { _last?: boolean })._last === true) this.sockets.add(req.socket);
  }

  /** An upgrade or CONNECT handler that is not run on a closing connection. */
  guard<A extends unknown[]>(handler: (req: http.IncomingMessage, ...rest: A) => void): (req: http.IncomingMessage, ...rest: A) => void {
    return (req, ...rest) => {
      if (!this.refuses(req)) handler(req, ...rest);
    };
  }

  /** Node's parser rejected what came on `socket` (its 'clientError'). */
  clientError(err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Duplex): void {
    if (err.code === 'ECONNRESET') return void socket.destroy();
    // The parser reports its failure again on every later read: answered once.
    if (this.failed.has(socket)) return;
    this.failed.add(socket);
    // An answer on it already said `Connection: close` (or its request did).
    const closing = this.sockets.has(socket);
    this.sockets.add(socket);
    const last = this.latest.get(socket);
    const pending = last !== undefined && !last.writableFinished && !last.destroyed;
    if (pending && !last.req.complete && !last.writableEnded) {
      // The error is in the body of the request being answered, which is cut: an error answer
      // only while nothing of its answer went out.
      if (last.headersSent || !socket.writable) return void socket.destroy();
      return sendClientError(err, socket);
    }
    if (closing || err.code === 'HPE_CLOSED_CONNECTION') {
      // What came after a request or an answer that closes the connection is ignored, as nginx
      // does: Node's server closes the connection once that answer is out.
      if (!pending) endThenDestroy(socket);
      return;
    }
    if (pending) {
      // A later request went bad: the answers before it first, then the error and the close.
      last.once('finish', () => (socket.writable ? sendClientError(err, socket) : endThenDestroy(socket)));
      last.once('close', () => (last.writableFinished ? undefined : socket.destroy()));
      return;
    }
    if (!socket.writable) return void socket.destroy();
    sendClientError(err, socket);
  }
}

/** A request line whose version is well formed (one the parser does not speak: 505, not 400). */
const WELL_FORMED_VERSION = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+ [^ \r\n]+ HTTP\/\d+\.\d+\r\n/;

/** Close once what was written is out; a client that never closes its side is dropped after a while. */
function endThenDestroy(socket: Duplex): void {
  socket.end();
  lingerThenDestroy(socket);
}

function lingerThenDestroy(socket: Duplex): void {
  // end() only half-closes: a client that never closes its side would hold the connection forever.
  setTimeout(() => socket.destroy(), ERROR_LINGER_MS).unref();
}

/**
 * Malformed requests get the status Node's parser chose, with a JSON body where we can write one,
 * and the connection is closed.
 */
function sendClientError(err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Duplex): void {
  let status: number = ERRORS.BAD_REQUEST.status;
  let message: string = ERRORS.BAD_REQUEST.message;
  let code: ErrorCode = 'BAD_REQUEST';
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    code = 'HEADERS_TOO_LARGE';
    ({ status, message } = ERRORS[code]);
  } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT' || err.code === 'ERR_HTTP_HEADERS_TIMEOUT') {
    // (No code of its own: a 408 is only ever Node's parser's.)
    status = 408;
    message = 'request timeout';
  } else if (err.code === 'HPE_INVALID_VERSION' && WELL_FORMED_VERSION.test(err.rawPacket?.toString('latin1', 0, 8192) ?? '')) {
    code = 'HTTP_VERSION_NOT_SUPPORTED';
    ({ status, message } = ERRORS[code]);
  } else if (err.code) {
    message = `bad request: ${err.code.replace(/^HPE_/, '').toLowerCase().replace(/_/g, ' ')}`;
  }
  const body = errorBody(status, message, code, '');
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
  lingerThenDestroy(socket);
}
