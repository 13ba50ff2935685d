/**
 * HPACK decoding (src/grpc/hpack.ts) against RFC 7541's own examples (Appendix C.4: requests with
 * Huffman strings and a growing dynamic table; C.6: answers with a 256-byte table that evicts), the
 * Huffman code's known codes, and the malformed inputs the RFC names as decoding errors.
 */
import t from 'tap';
import { encodeFields, HpackDecoder, HUFFMAN_CODES, huffmanDecode } from '../../src/grpc/hpack.js';

const decodeAll = (d: HpackDecoder, hex: string): string[] => {
  const out: string[] = [];
  d.decode(Buffer.from(hex.replace(/\s+/g, ''), 'hex'), (n, v) => out.push(`${n}: ${v}`));
  return out;
};

t.test('the canonical code rebuilt from the lengths matches RFC 7541 Appendix B', async (t) => {
  t.equal(HUFFMAN_CODES[0], 0x1ff8);
  t.equal(HUFFMAN_CODES[32], 0x14); // ' '
  t.equal(HUFFMAN_CODES[48], 0x0); // '0'
  t.equal(HUFFMAN_CODES[97], 0x3); // 'a'
  t.equal(HUFFMAN_CODES[255], 0x3ffffee);
  t.equal(HUFFMAN_CODES[256], 0x3fffffff, 'EOS');
});

t.test('C.4: requests with Huffman coding, one decoder for all three', async (t) => {
  const d = new HpackDecoder();
  t.same(decodeAll(d, '8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff'), [':method: GET', ':scheme: http', ':path: /', ':authority: www.example.com']);
  t.same(decodeAll(d, '8286 84be 5886 a8eb 1064 9cbf'), [':method: GET', ':scheme: http', ':path: /', ':authority: www.example.com', 'cache-control: no-cache']);
  t.same(decodeAll(d, '8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf'), [':method: GET', ':scheme: https', ':path: /index.html', ':authority: www.example.com', 'custom-key: custom-value']);
});

t.test('C.6: answers with Huffman coding and a 256-byte table (evictions)', async (t) => {
  const d = new HpackDecoder(256);
  t.same(decodeAll(d, '4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3'), [
    ':status: 302', 'cache-control: private', 'date: Mon, 21 Oct 2013 20:13:21 GMT', 'location: https://www.example.com',
  ]);
  t.same(decodeAll(d, '4883 640e ffc1 c0bf'), [':status: 307', 'cache-control: private', 'date: Mon, 21 Oct 2013 20:13:21 GMT', 'location: https://www.example.com']);
  t.same(decodeAll(d, '88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07'), [
    ':status: 200', 'cache-control: private', 'date: Mon, 21 Oct 2013 20:13:22 GMT', 'location: https://www.example.com',
    'content-encoding: gzip', 'set-cookie: foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1',
  ]);
});

t.test('decoding errors', async (t) => {
  const bad = (hex: string, pattern: RegExp, max = 4096) => t.throws(() => new HpackDecoder(max).decode(Buffer.from(hex, 'hex'), () => undefined), pattern);
  bad('80', /index 0/);
  bad('be', /beyond the table/); // 62: the dynamic table is empty
  bad('3fe21f', /table size update to 4097/, 4096);
  bad('823f', /table size update after a field/);
  bad('ffffffffffff0f', /integer too large/);
  bad('0f', /truncated/);
  bad('4085', /truncated string/);
  t.throws(() => huffmanDecode(Buffer.from([0xff, 0xff, 0xff, 0xff]), 0, 4), /EOS inside/, 'EOS inside a string');
  t.throws(() => huffmanDecode(Buffer.from([0x00]), 0, 1), /padding/, 'padding that is not all ones');
  t.throws(() => huffmanDecode(Buffer.from([0x1f, 0xff]), 0, 2), /padding/, 'padding of 8 bits or more');
});

t.test('encodeFields: static entries indexed, the rest literal without indexing, decodable', async (t) => {
  const block = encodeFields([[':method', 'POST'], [':path', '/a.B/C'], ['content-type', 'application/grpc'], ['te', 'trailers']]);
  t.equal(block[0], 0x83, ':method POST is static entry 3');
  const d = new HpackDecoder();
  const out: string[] = [];
  d.decode(block, (n, v) => out.push(`${n}: ${v}`));
  t.same(out, [':method: POST', ':path: /a.B/C', 'content-type: application/grpc', 'te: trailers']);
});
