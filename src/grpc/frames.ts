/**
 * HTTP/2 (RFC 9113) on the wire for ./connection.ts and its two sides: frame types, flags, settings,
 * error codes, our limits and windows, and the few frames built whole (a frame, its header, our
 * opening SETTINGS). Nothing here reads or keeps state.
 */
export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export const DATA = 0x0;
export const HEADERS = 0x1;
export const PRIORITY = 0x2;
export const RST_STREAM = 0x3;
export const SETTINGS = 0x4;
export const PUSH_PROMISE = 0x5;
export const PING = 0x6;
export const GOAWAY = 0x7;
export const WINDOW_UPDATE = 0x8;
export const CONTINUATION = 0x9;

export const END_STREAM = 0x1;
export const ACK = 0x1;
export const END_HEADERS = 0x4;
export const PADDED = 0x8;
export const PRIORITY_FLAG = 0x20;

export const SETTINGS_HEADER_TABLE_SIZE = 0x1;
export const SETTINGS_ENABLE_PUSH = 0x2;
export const SETTINGS_MAX_CONCURRENT_STREAMS = 0x3;
export const SETTINGS_INITIAL_WINDOW_SIZE = 0x4;
export const SETTINGS_MAX_FRAME_SIZE = 0x5;
export const SETTINGS_MAX_HEADER_LIST_SIZE = 0x6;

/** HTTP/2 error codes (RFC 9113 §7). */
export const H2Error = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  ENHANCE_YOUR_CALM: 0xb,
} as const;

export const MAX_WINDOW = 0x7fffffff;
export const MAX_STREAM_ID = 0x7fffffff;
export const DEFAULT_WINDOW = 65_535;
export const MIN_FRAME_SIZE = 16_384;
export const MAX_FRAME_SIZE = 0xffffff;
/** What we accept: the protocol's default frame size, and header blocks up to this. */
export const OUR_MAX_FRAME = MIN_FRAME_SIZE;
export const MAX_HEADER_BLOCK = 64 * 1024;
/** Our receive windows: per stream (SETTINGS_INITIAL_WINDOW_SIZE) and for the connection. */
export const STREAM_WINDOW = 1 << 20;
export const CONNECTION_WINDOW = 16 << 20;

export function frameHeader(out: Buffer, at: number, length: number, type: number, flags: number, streamId: number): void {
  out[at] = length >>> 16;
  out[at + 1] = (length >>> 8) & 0xff;
  out[at + 2] = length & 0xff;
  out[at + 3] = type;
  out[at + 4] = flags;
  out.writeUInt32BE(streamId, at + 5);
}

export function frame(type: number, flags: number, streamId: number, payload: Buffer | undefined): Buffer {
  const length = payload ? payload.length : 0;
  const out = Buffer.allocUnsafe(9 + length);
  frameHeader(out, 0, length, type, flags, streamId);
  if (payload) payload.copy(out, 9);
  return out;
}

export function u32(value: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32BE(value, 0);
  return b;
}

/** Our SETTINGS frame and the connection WINDOW_UPDATE that raises its window to CONNECTION_WINDOW. */
export function openingFrames(entries: readonly (readonly [number, number])[]): Buffer {
  const payload = Buffer.allocUnsafe(entries.length * 6);
  entries.forEach(([id, value], i) => {
    payload.writeUInt16BE(id, i * 6);
    payload.writeUInt32BE(value, i * 6 + 2);
  });
  return Buffer.concat([frame(SETTINGS, 0, 0, payload), frame(WINDOW_UPDATE, 0, 0, u32(CONNECTION_WINDOW - DEFAULT_WINDOW))]);
}
