/** UTF-8 sanitizing of the strings a check carries. */
import t from 'tap';
import { wireString, wellFormed, utf8Body } from '../../src/extauth/utf8.js';

const latin1 = (bytes: number[]): string => Buffer.from(bytes).toString('latin1');

t.test('wireString: latin1-decoded wire bytes re-read as UTF-8', async (t) => {
  const cases: [input: string, expect: string, why: string][] = [
    ['plain ascii', 'plain ascii', 'ASCII unchanged'],
    ['', '', 'empty'],
    [latin1([0xc3, 0xa9]), 'é', 'two-byte sequence'],
    [latin1([0xe2, 0x82, 0xac]), '€', 'three-byte sequence'],
    [latin1([0xf0, 0x9f, 0x98, 0x80]), '😀', 'four-byte sequence'],
    [latin1([0xff]), '\uFFFD', 'invalid byte'],
    [latin1([0x61, 0xc3]), 'a\uFFFD', 'truncated sequence'],
    [latin1([0xc0, 0xaf]), '\uFFFD\uFFFD', 'overlong encoding'],
    [latin1([0xed, 0xa0, 0x80]), '\uFFFD\uFFFD\uFFFD', 'encoded surrogate'],
    [latin1([0x80, 0x41]), '\uFFFDA', 'lone continuation byte'],
    ['already \u00e9 \u20ac', 'already \u00e9 \u20ac', 'not a byte string (char > 0xff): kept'],
    ['lone \ud800 surrogate \u20ac', 'lone \uFFFD surrogate \u20ac', 'lone surrogate in real Unicode'],
  ];
  for (const [input, expect, why] of cases) {
    const out = wireString(input);
    t.equal(out, expect, why);
    t.equal(Buffer.from(out, 'utf8').toString('utf8'), out, `${why}: round-trips as valid UTF-8`);
  }
  const s = 'x'.repeat(100);
  t.equal(wireString(s), s, 'ASCII is returned as is');
});

t.test('wellFormed and utf8Body', async (t) => {
  t.equal(wellFormed('ok é'), 'ok é');
  t.equal(wellFormed('\udc00x'), '\uFFFDx');
  t.equal(wellFormed('\ud83d\ude00'), '😀', 'a surrogate pair is fine');
  t.equal(utf8Body(Buffer.from([0x68, 0x69, 0xff])), 'hi\uFFFD');
});
