/**
 * The replay buffer: a request body read once from the client and handed to each upstream attempt as
 * a fresh stream. The first 64 KiB are kept so a retry can send them again; once the body grows past
 * that, the kept bytes are dropped and the request can no longer be retried (DESIGN §7). Backpressure
 * passes through: the client is read only as fast as the current attempt consumes. An attempt's
 * stream being destroyed (the upstream failed) never destroys the client's request.
 */
import { Readable } from 'node:stream';

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
    this.source.on('data', (chunk: Buffer) => {
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
      if (current && !current.destroyed && !current.push(chunk)) this.source.pause();
    });
    this.source.once('end', () => {
      this.ended = true;
      const current = this.current;
      if (current && !current.destroyed) current.push(null);
    });
    this.source.once('error', (err: Error) => {
      this.failed = err;
      this.replayable = false;
      this.current?.destroy(err);
    });
  }
}
