/**
 * HPACK decoding (src/grpc/hpack.ts) against RFC 7541's own examples, every one of Appendix C's
 * header blocks with the fields and dynamic table the RFC lists after it (C.2: each kind of field
 * representation; C.3 and C.4: three requests on one connection, without and with Huffman strings,
 * the table growing; C.5 and C.6: three answers with a 256-byte table that evicts), the Huffman
 * code's known codes, and the malformed inputs the RFC names as decoding errors. The decoder against
 * nghttp2 on generated and mutated blocks is ./hpack-nghttp2.test.ts.
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

/** The dynamic table as the RFC prints it: `[n] (s = size) name: value`, newest first, then its size. */
const table = (d: HpackDecoder): string[] => {
  const { entries, size } = d.dynamicTable();
  return [...entries.map(([n, v], i) => `[${i + 1}] (s = ${n.length + v.length + 32}) ${n}: ${v}`), `size ${size}`];
};

t.test('C.2: one field of each representation, each on a fresh decoder', async (t) => {
  const cases: [string, string, string, string[]][] = [
    ['C.2.1 literal with indexing', '400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572', 'custom-key: custom-header', ['[1] (s = 55) custom-key: custom-header', 'size 55']],
    ['C.2.2 literal without indexing', '040c 2f73 616d 706c 652f 7061 7468', ':path: /sample/path', ['size 0']],
    ['C.2.3 literal never indexed', '1008 7061 7373 776f 7264 0673 6563 7265 74', 'password: secret', ['size 0']],
    ['C.2.4 indexed', '82', ':method: GET', ['size 0']],
  ];
  for (const [name, hex, field, after] of cases) {
    const d = new HpackDecoder();
    t.same(decodeAll(d, hex), [field], name);
    t.same(table(d), after, `${name}: the table after it`);
  }
});

t.test('C.3: requests without Huffman coding, one decoder for all three', async (t) => {
  const d = new HpackDecoder();
  t.same(decodeAll(d, '8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d'), [':method: GET', ':scheme: http', ':path: /', ':authority: www.example.com']);
  t.same(table(d), ['[1] (s = 57) :authority: www.example.com', 'size 57']);
  t.same(decodeAll(d, '8286 84be 5808 6e6f 2d63 6163 6865'), [':method: GET', ':scheme: http', ':path: /', ':authority: www.example.com', 'cache-control: no-cache']);
  t.same(table(d), ['[1] (s = 53) cache-control: no-cache', '[2] (s = 57) :authority: www.example.com', 'size 110']);
  t.same(decodeAll(d, '8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65'), [':method: GET', ':scheme: https', ':path: /index.html', ':authority: www.example.com', 'custom-key: custom-value']);
  t.same(table(d), ['[1] (s = 54) custom-key: custom-value', '[2] (s = 53) cache-control: no-cache', '[3] (s = 57) :authority: www.example.com', 'size 164']);
});

t.test('C.4: requests with Huffman coding, one decoder for all three', async (t) => {
  const d = new HpackDecoder();
  t.same(decodeAll(d, '8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff'), [':method: GET', ':scheme: http', ':path: /', ':authority: www.example.com']);
  t.same(decodeAll(d, '8286 84be 5886 a8eb 1064 9cbf'), [':method: GET', ':scheme: http', ':path: /', ':authority: www.example.com', 'cache-control: no-cache']);
  t.same(decodeAll(d, '8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf'), [':method: GET', ':scheme: https', ':path: /index.html', ':authority: www.example.com', 'custom-key: custom-value']);
});

t.test('C.5: answers without Huffman coding and a 256-byte table (evictions)', async (t) => {
  const d = new HpackDecoder(256);
  t.same(decodeAll(d, '4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d'), [
    ':status: 302', 'cache-control: private', 'date: Mon, 21 Oct 2013 20:13:21 GMT', 'location: https://www.example.com',
  ]);
  t.same(table(d), [
    '[1] (s = 63) location: https://www.example.com', '[2] (s = 65) date: Mon, 21 Oct 2013 20:13:21 GMT',
    '[3] (s = 52) cache-control: private', '[4] (s = 42) :status: 302', 'size 222',
  ]);
  // ':status: 307' goes in, ':status: 302' is evicted.
  t.same(decodeAll(d, '4803 3330 37c1 c0bf'), [':status: 307', 'cache-control: private', 'date: Mon, 21 Oct 2013 20:13:21 GMT', 'location: https://www.example.com']);
  t.same(table(d), [
    '[1] (s = 42) :status: 307', '[2] (s = 63) location: https://www.example.com',
    '[3] (s = 65) date: Mon, 21 Oct 2013 20:13:21 GMT', '[4] (s = 52) cache-control: private', 'size 222',
  ]);
  t.same(decodeAll(d, '88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31'), [
    ':status: 200', 'cache-control: private', 'date: Mon, 21 Oct 2013 20:13:22 GMT', 'location: https://www.example.com',
    'content-encoding: gzip', 'set-cookie: foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1',
  ]);
  t.same(table(d), [
    '[1] (s = 98) set-cookie: foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1', '[2] (s = 52) content-encoding: gzip',
    '[3] (s = 65) date: Mon, 21 Oct 2013 20:13:22 GMT', 'size 215',
  ]);
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
