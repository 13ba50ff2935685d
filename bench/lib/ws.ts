/**
 * Just enough RFC 6455 for the bench: the handshake accept key, building frames (masked from the
 * client, unmasked from the server) and a parser that yields whole frames from a byte stream. No
 * extensions, no fragmentation across frames (the bench never sends any).
 */
import { createHash, randomBytes } from 'node:crypto';

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

export function acceptKey(key: string): string {
  return createHash('sha1').update(key + GUID).digest('base64');
}

export function clientKey(): string {
  return randomBytes(16).toString('base64');
}

export const OP_TEXT = 1;
export const OP_BINARY = 2;
export const OP_CLOSE = 8;
export const OP_PING = 9;
export const OP_PONG = 10;

export function frame(opcode: number, payload: Buffer, mask: boolean): Buffer {
  const len = payload.length;
  const headerLen = 2 + (len < 126 ? 0 : len < 65536 ? 2 : 8) + (mask ? 4 : 0);
  const out = Buffer.allocUnsafe(headerLen + len);
  out[0] = 0x80 | opcode;
  let offset = 2;
  if (len < 126) {
    out[1] = len;
  } else if (len < 65536) {
    out[1] = 126;
    out.writeUInt16BE(len, 2);
    offset = 4;
  } else {
    out[1] = 127;
    out.writeBigUInt64BE(BigInt(len), 2);
    offset = 10;
  }
  if (mask) {
    out[1]! |= 0x80;
    const key = randomBytes(4);
    key.copy(out, offset);
    offset += 4;
    for (let i = 0; i < len; i++) out[offset + i] = payload[i]! ^ key[i & 3]!;
  } else {
    payload.copy(out, offset);
  }
  return out;
}

export interface Frame {
  opcode: number;
  payload: Buffer;
}

/** Feed bytes; get back every whole frame they complete (payload unmasked). */
export class FrameParser {
  private buf: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Frame[] {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const frames: Frame[] = [];
    for (;;) {
      const b = this.buf;
      if (b.length < 2) break;
      const masked = (b[1]! & 0x80) !== 0;
      let len = b[1]! & 0x7f;
      let offset = 2;
      if (len === 126) {
        if (b.length < 4) break;
        len = b.readUInt16BE(2);
        offset = 4;
      } else if (len === 127) {
        if (b.length < 10) break;
        len = Number(b.readBigUInt64BE(2));
        offset = 10;
      }
      const keyAt = offset;
      if (masked) offset += 4;
      if (b.length < offset + len) break;
      let payload = b.subarray(offset, offset + len);
      if (masked) {
        const unmasked = Buffer.allocUnsafe(len);
        for (let i = 0; i < len; i++) unmasked[i] = payload[i]! ^ b[keyAt + (i & 3)]!;
        payload = unmasked;
      } else {
        payload = Buffer.from(payload);
      }
      frames.push({ opcode: b[0]! & 0x0f, payload });
      this.buf = b.subarray(offset + len);
    }
    return frames;
  }
}
