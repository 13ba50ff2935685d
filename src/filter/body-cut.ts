/**
 * Was a request body that just ended ('end') cut by the client? node:http2's compat request
 * (Http2ServerRequest) ends its body on a reset too: when the client sends RST_STREAM mid-upload or
 * its connection drops, the request emits 'aborted', 'close' and then the same 'end' a whole body
 * gets (Node 20.20; test/integration/h2-client-abort.test.ts holds Node to it). Whatever frames a
 * body for an upstream (a terminating chunk, END_STREAM) or replays it asks here at 'end', so a cut
 * body is never passed on as whole. An HTTP/1.1 request (IncomingMessage) does not end when cut (it
 * fails), and other streams have no HTTP/2 stream to ask: false for them.
 *
 * Asked at 'end' only, where the stream is aborted (reset while our answer was open), closed with a
 * reset code (reset after our answer ended), or neither (END_STREAM arrived). A body that ended whole
 * before a reset ends first and reads whole; should its 'end' be held back past the reset (a paused
 * reader), it reads cut: its client is gone, and cutting the upstream request too loses nothing.
 */
import http2 from 'node:http2';
import type { Readable } from 'node:stream';

const { NGHTTP2_NO_ERROR } = http2.constants;

/** What fails whatever was carrying a body the client cut (an upstream request, a replay). */
export const BODY_CUT = 'the request body was cut by the client';

export function bodyCut(body: Readable): boolean {
  const stream = (body as { stream?: http2.Http2Stream }).stream;
  if (stream === undefined) return false;
  return stream.aborted || (stream.rstCode !== undefined && stream.rstCode !== NGHTTP2_NO_ERROR);
}
