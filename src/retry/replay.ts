/**
 * The replay buffer: a request body read once from the client and handed to each upstream attempt as
 * a fresh stream. The first 64 KiB are kept so a retry can send them again; once the body grows past
 * that, the kept bytes are dropped and the request can no longer be retried (DESIGN §7). Backpressure
 * passes through: the client is read only as fast as the current attempt consumes. An attempt's
 * stream being destroyed (the upstream failed) never destroys the client's request. A body the
 * client cut fails the attempt's stream instead of ending it, so no attempt sends it as whole:
 * node:http2's compat request ends ('end') after a reset too, hence the check there (body-cut.ts).
 */
import { Readable } from 'node:stream';
import { BODY_CUT, bodyCut } from '../filter/index.js';

export const REPLAY_LIMIT = 64 * 1024;

export class ReplayableBody {
  private chunks: Buffer[] = [];
  private size = 0;
  private ended = false;
  private failed: Error | undefined;
  private current: Readable | undefined;
  private attached = false;
  /** False once the body outgrew the buffer (or failed): no further attempt may be made. */
  replayable = true;
  attempts = 0;

  constructor(private readonly source: Readable, private readonly limit = REPLAY_LIMIT) {}

  /** A fresh stream for the next attempt, or undefined when the body can no longer be replayed. */
  attempt(): Readable | undefined {
    if (this.attempts > 0 && !this.replayable) return undefined;
    this.attempts++;
    const previous = this.current;
    const stream = new Readable({
      read: () => {
        if (this.current === stream && !this.ended) this.source.resume();
      },
      destroy: (err, cb) => {
        if (this.current === stream) this.source.pause();
        cb(err);
      },
    });
    this.current = stream;
    if (previous && !previous.destroyed) previous.destroy();
    for (const chunk of this.chunks) stream.push(chunk);
    if (this.failed) stream.destroy(this.failed);
    else if (this.ended) stream.push(null);
    this.attach();
    return stream;
  }

  private attach(): void {
    if (this.attached) return;
    this.attached = true;
    const source = this.source;
    // Read or failed before this first attempt (nothing does either): no event will come, and the
    // bytes are not ours to send.
    if (source.readableEnded || source.destroyed) return this.fail(source.errored ?? new Error('the request body was over before it was read'));
    source.on('data', (chunk: Buffer) => {
      if (this.replayable) {
        if (this.size + chunk.length <= this.limit) {
          this.chunks.push(chunk);
          this.size += chunk.length;
        } else {
          this.replayable = false;
          this.chunks = [];
        }
      }
      const current = this.current;
      if (current && !current.destroyed && !current.push(chunk)) source.pause();
    });
    source.once('end', () => this.end());
    source.once('error', (err: Error) => this.fail(err));
  }

  private end(): void {
    if (bodyCut(this.source)) return this.fail(new Error(BODY_CUT));
    this.ended = true;
    const current = this.current;
    if (current && !current.destroyed) current.push(null);
  }

  private fail(err: Error): void {
    if (this.failed) return;
    this.failed = err;
    this.replayable = false;
    this.current?.destroy(err);
  }
}
