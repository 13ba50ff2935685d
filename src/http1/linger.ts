/**
 * Lingering close (nginx's `lingering_close`, RFC 9112 §9.6): after the last answer on an HTTP/1.1
 * connection, only the sending side is closed; what the client still sends is read and dropped until
 * it closes its side too, or `LINGER_MS` pass. Closing both sides at once while the client is still
 * sending a body (a 413 before the body is read, any answer given before its request's end) makes the
 * kernel answer the client's next bytes with a reset, and a reset throws away the answer the client
 * has not read yet: it would see ECONNRESET instead of the 413.
 */
import type { Duplex } from 'node:stream';

/** How long a closing connection keeps reading what its client still sends. */
export const LINGER_MS = 5000;

/** End the sending side once what was written is out; read and drop until the client ends, or `LINGER_MS`. */
export function lingeringClose(socket: Duplex): void {
  if (socket.destroyed) return;
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  socket.once('end', () => socket.destroy());
  socket.on('error', () => socket.destroy());
  socket.end();
  // Nobody else may be reading: flowing mode drops what arrives.
  socket.resume();
}
