/**
 * The buffer that outgoing connections opened with `onread` (net.connect's option) read into: the
 * kernel copies incoming bytes straight into it, with no buffer allocated per read and no Readable
 * stream between the socket and its parser. One buffer serves every such socket, since a read's
 * callback runs to its end before the next read starts; so nothing may keep a view of it past the
 * callback: whatever must stay is copied out (`inReadBuffer` tells a view of it).
 */
export const READ_BUFFER = Buffer.alloc(64 * 1024);

/** Whether `bytes` is a view of the shared read buffer (valid only until the read's callback ends). */
export function inReadBuffer(bytes: Buffer): boolean {
  return bytes.buffer === READ_BUFFER.buffer;
}
