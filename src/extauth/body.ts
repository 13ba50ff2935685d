/**
 * Reading the first bytes of a request body for the check without losing them: buffer until more
 * than `limit` bytes arrived or the body ended, then hand the app a stream that replays the
 * buffered chunks in front of the rest (Exchange.bodyOverride). How long this may wait is bounded
 * by the request's own timeout (started before the filters run); a client that goes away ends the
 * read with what arrived. A body of unknown length (chunked, or a gRPC stream) may be a
 * conversation — a client that sends one message and waits for the answer — so with `idle` set the
 * read also ends, partial, once no byte arrived for that long after the first chunk: the check goes
 * out with what there is instead of waiting for bytes that only come after the answer.
 *
 * The rest is moved with `pause()`/`resume()` and 'data', never with `read()` (an async iterator,
 * 'readable'): node:http2's compat request (Http2ServerRequest) pauses its Http2Stream on `pause()`
 * and restarts it only on `resume()` or a fresh `_read`, and a request paused while waiting for bytes
 * has its `_read` pending already, so a reader that only calls `read()` waits forever (issue 25 #9).
 *
 * A body the client cut never replays as whole: cut during this read ('aborted', 'close' or 'error'
 * before 'end', or an 'end' after a reset: node:http2's compat request ends then too, body-cut.ts),
 * the replay gives what arrived and then fails; cut later, the rest fails it the same way.
 */
import { Readable } from 'node:stream';
import { BODY_CUT, bodyCut } from '../filter/index.js';
import type { Clock, Timer } from '../deps.js';

export interface IdleLimit {
  readonly ms: number;
  readonly clock: Clock;
}

export interface BodyPrefix {
  /** The first `limit` bytes at most. */
  readonly bytes: Buffer;
  /** More followed, or the body was longer than the limit. */
  readonly partial: boolean;
  /** The whole body again, for the upstream request. */
  readonly replay: Readable;
}

/** How the read stopped: the body ended whole, more is to come (limit, idle), or the client cut it. */
type Stop = 'end' | 'more' | 'cut';

export function readBodyPrefix(source: Readable, limit: number, idle?: IdleLimit): Promise<BodyPrefix> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let done = false;
    let timer: Timer | undefined;
    const finish = (stop: Stop): void => {
      if (done) return;
      done = true;
      if (timer !== undefined) idle?.clock.clearTimeout(timer);
      source.off('data', onData);
      source.off('end', onEnd);
      source.off('error', onCut);
      source.off('aborted', onCut);
      source.off('close', onCut);
      if (stop === 'more') source.pause();
      const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
      resolve({
        bytes: all.length > limit ? all.subarray(0, limit) : all,
        partial: stop !== 'end' || total > limit,
        replay: replayStream(chunks, stop === 'more' ? source : undefined, stop === 'cut'),
      });
    };
    const onData = (chunk: Buffer | string): void => {
      const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      chunks.push(b);
      total += b.length;
      if (total > limit) return finish('more');
      if (idle) {
        if (timer !== undefined) idle.clock.clearTimeout(timer);
        timer = idle.clock.setTimeout(() => finish('more'), idle.ms);
      }
    };
    const onEnd = (): void => finish(bodyCut(source) ? 'cut' : 'end');
    // A client that goes away ends the read with what arrived (the check is not made for it).
    const onCut = (): void => finish('cut');
    if (source.readableEnded) return onEnd();
    source.on('data', onData);
    source.once('end', onEnd);
    source.once('error', onCut);
    source.once('aborted', onCut);
    source.once('close', onCut);
    source.resume();
  });
}

/**
 * The buffered chunks, then the paused `rest` as it arrives: the reader's demand (`_read`) resumes
 * the source and a full buffer pauses it again, so at most a high-water mark is held. A source that
 * fails, is aborted or ends cut (the client reset mid-body) fails the replay, and so does `cut` (the
 * body was cut while the prefix was read), so the upstream request is cancelled rather than ended
 * as if the body were whole.
 */
function replayStream(chunks: readonly Buffer[], rest: Readable | undefined, cut: boolean): Readable {
  const out = new Readable({
    read: () => {
      rest?.resume();
    },
    destroy: (err, callback) => {
      // The request itself stays: its server dumps what is left once the answer is sent.
      if (rest) detach();
      callback(err);
    },
  });
  // A client may go away while the check is out, before any reader listens: as node:http's and
  // node:http2's requests do, an error nobody listens for is not thrown; readers attach their own.
  out.on('error', ignore);
  for (const chunk of chunks) out.push(chunk);
  if (cut) {
    out.destroy(new Error(BODY_CUT));
    return out;
  }
  if (!rest) {
    out.push(null);
    return out;
  }
  const onData = (chunk: Buffer | string): void => {
    if (!out.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)) rest.pause();
  };
  const onEnd = (): void => {
    detach();
    if (bodyCut(rest)) out.destroy(new Error(BODY_CUT));
    else out.push(null);
  };
  const onError = (err: Error): void => {
    out.destroy(err);
  };
  const onAborted = (): void => {
    out.destroy(new Error('the request body was aborted'));
  };
  const detach = (): void => {
    rest.off('data', onData);
    rest.off('end', onEnd);
    rest.off('error', onError);
    rest.off('aborted', onAborted);
  };
  // Paused (finish above), so this listener does not start the flow: the first `_read` does.
  rest.on('data', onData);
  rest.on('end', onEnd);
  rest.on('error', onError);
  rest.on('aborted', onAborted);
  if (rest.readableEnded) onEnd();
  return out;
}

function ignore(): void {}
