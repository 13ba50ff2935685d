/**
 * Where JSON text first goes wrong. V8's `JSON.parse` names the position for some errors but not
 * for others (`Unexpected token ']', "..." is not valid JSON`: a trailing comma), so a failed parse is
 * scanned again by this strict RFC 8259 recognizer, which answers the offset of the first character
 * that cannot continue a valid text (the text's length when it ends too early), or -1 when the text
 * is valid. Used only after `JSON.parse` failed; it builds no values. Never throws.
 */

const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
const LITERAL = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null/y;

/** Thrown inside the recognizer to unwind to the offending offset. */
class JsonOffset {
  constructor(readonly offset: number) {}
}

export function jsonErrorOffset(text: string): number {
  let i = 0;
  const fail = (): never => {
    throw new JsonOffset(i);
  };
  const ws = (): void => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r')) i++;
  };
  const token = (re: RegExp): void => {
    re.lastIndex = i;
    const m = re.exec(text);
    if (!m) fail();
    i = re.lastIndex;
  };
  const expect = (c: string): void => {
    ws();
    if (text[i] !== c) fail();
    i++;
  };
  const value = (): void => {
    ws();
    const c = text[i];
    if (c === '"') return token(STRING);
    if (c !== '{' && c !== '[') return token(LITERAL);
    const close = c === '{' ? '}' : ']';
    i++;
    ws();
    if (text[i] === close) {
      i++;
      return;
    }
    for (;;) {
      if (c === '{') {
        ws();
        if (text[i] !== '"') fail();
        token(STRING);
        expect(':');
      }
      value();
      ws();
      if (text[i] === close) {
        i++;
        return;
      }
      expect(',');
    }
  };
  try {
    value();
    ws();
    if (i < text.length) fail();
    return -1;
  } catch (e) {
    if (e instanceof JsonOffset) return e.offset;
    return i; // nesting deeper than the stack: point where it got to
  }
}
