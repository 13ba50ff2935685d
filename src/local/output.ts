/**
 * Splits a child process's stdout or stderr into lines for the logger. UTF-8 is decoded across
 * chunk boundaries, `\r\n` counts as one break, and a line longer than `maxLine` characters is cut
 * into pieces of that size rather than buffered without bound (a process printing megabytes with
 * no newline cannot exhaust our memory). A stream error ends the splitting quietly: the process's
 * exit is what the supervisor acts on, not its pipes.
 */
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';

export const MAX_LINE = 16 * 1024;

export class LineSplitter {
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';

  constructor(
    private readonly onLine: (line: string) => void,
    private readonly maxLine: number = MAX_LINE,
  ) {}

  write(chunk: Buffer | string): void {
    this.pending += typeof chunk === 'string' ? chunk : this.decoder.write(chunk);
    let newline: number;
    while ((newline = this.pending.indexOf('\n')) !== -1) {
      this.emit(this.pending.slice(0, newline));
      this.pending = this.pending.slice(newline + 1);
    }
    while (this.pending.length > this.maxLine) {
      this.onLine(this.pending.slice(0, this.maxLine));
      this.pending = this.pending.slice(this.maxLine);
    }
  }

  end(): void {
    this.pending += this.decoder.end();
    if (this.pending.length > 0) this.emit(this.pending);
    this.pending = '';
  }

  private emit(line: string): void {
    const text = line.endsWith('\r') ? line.slice(0, -1) : line;
    for (let i = 0; i < text.length || i === 0; i += this.maxLine) this.onLine(text.slice(i, i + this.maxLine));
  }
}

/** Feeds every line of `stream` to `onLine` until the stream ends or fails. */
export function pipeLines(stream: Readable, onLine: (line: string) => void, maxLine: number = MAX_LINE): void {
  const splitter = new LineSplitter(onLine, maxLine);
  stream.on('data', (chunk: Buffer | string) => splitter.write(chunk));
  stream.once('end', () => splitter.end());
  stream.once('error', () => splitter.end());
}
