/**
 * Just enough of the protobuf wire format for the bench's sinks and clients to check what they
 * receive without decoding whole messages: varints and a message's top-level fields.
 */

/** A protobuf varint at `at`: its value and the offset after it. */
export function varint(buf: Buffer, at: number): [number, number] {
  let value = 0;
  let scale = 1;
  for (;;) {
    if (at >= buf.length) throw new Error('truncated varint');
    const b = buf[at++]!;
    value += (b & 0x7f) * scale;
    if (b < 0x80) return [value, at];
    scale *= 128;
  }
}

/**
 * The top-level fields of `buf[from, to)`, tag by tag: a varint field's value, or a length-delimited
 * field's bytes; fixed 32/64-bit fields are skipped.
 */
export function eachField(buf: Buffer, onField: (field: number, value: number | Buffer) => void, from = 0, to = buf.length): void {
  let at = from;
  while (at < to) {
    let tag: number;
    [tag, at] = varint(buf, at);
    const field = Math.floor(tag / 8);
    switch (tag & 7) {
      case 0: {
        let v: number;
        [v, at] = varint(buf, at);
        onField(field, v);
        break;
      }
      case 1:
        at += 8;
        break;
      case 5:
        at += 4;
        break;
      case 2: {
        let len: number;
        [len, at] = varint(buf, at);
        onField(field, buf.subarray(at, at + len));
        at += len;
        break;
      }
      default:
        throw new Error(`wire type ${tag & 7} not expected`);
    }
  }
}
