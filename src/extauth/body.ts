/**
 * Reading the first bytes of a request body for the check without losing them: buffer until more
 * than `limit` bytes arrived or the body ended, then hand the app a stream that replays the
 * buffered chunks in front of the rest (Exchange.bodyOverride). How long this may wait is bounded
 * by the request's own timeout (started before the filters run); a client that goes away ends the
 * read with what arrived. A body of unknown length (chunked, or a gRPC stream) may be a
 * conversation — a client that sends one message and waits for the answer — so with `idle` set the
 * read also ends, partial, once no byte arrived for that long after the first chunk: the check goes
 * out with what there is instead of waiting for bytes that only come after the answer.
 */
import { Readable } from 'node:stream';
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

export function readBodyPrefix(source: Readable, limit: number, idle?: IdleLimit): Promise<BodyPrefix> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let done = false;
    let timer: Timer | undefined;
    const finish = (ended: boolean): void => {
      if (done) return;
      done = true;
      if (timer !== undefined) idle?.clock.clearTimeout(timer);
      source.off('data', onData);
      source.off('end', onEnd);
      source.off('error', onEnd);
      source.off('aborted', onEnd);
      source.off('close', onEnd);
      if (!ended) source.pause();
      const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
      resolve({
        bytes: all.length > limit ? all.subarray(0, limit) : all,
        partial: !ended || total > limit,
        replay: Readable.from(replay(chunks, ended ? undefined : source), { objectMode: false }),
      });
    };
    const onData = (chunk: Buffer | string): void => {
      const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      chunks.push(b);
      total += b.length;
      if (total > limit) return finish(false);
      if (idle) {
        if (timer !== undefined) idle.clock.clearTimeout(timer);
        timer = idle.clock.setTimeout(() => finish(false), idle.ms);
      }
    };
    const onEnd = (): void => finish(true);
    if (source.readableEnded) return finish(true);
    source.on('data', onData);
    source.once('end', onEnd);
    source.once('error', onEnd);
    source.once('aborted', onEnd);
    source.once('close', onEnd);
    source.resume();
  });
}

async function* replay(chunks: readonly Buffer[], rest: Readable | undefined): AsyncGenerator<Buffer> {
  yield* chunks;
  if (rest) for await (const chunk of rest) yield chunk as Buffer;
}
