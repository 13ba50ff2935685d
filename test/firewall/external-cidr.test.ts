/** CIDR parsing and matching, IPv4 and IPv6, as tables. */
import t from 'tap';
import { compileCidrs, cidrContains, parseAddress, parseCidr } from '../../src/firewall/cidr.js';

t.test('addresses', async (t) => {
  const cases: [string, unknown][] = [
    ['127.0.0.1', { family: 4, v4: 0x7f000001 }],
    ['::ffff:127.0.0.1', { family: 4, v4: 0x7f000001 }],
    ['::FFFF:7f00:1', { family: 4, v4: 0x7f000001 }],
    ['[::ffff:10.0.0.1]:443', { family: 4, v4: 0x0a000001 }],
    ['10.0.0.1:8080', { family: 4, v4: 0x0a000001 }],
    [' 10.0.0.1 ', { family: 4, v4: 0x0a000001 }],
    ['::1', { family: 6, v6: [0, 0, 0, 0, 0, 0, 0, 1] }],
    ['[::1]', { family: 6, v6: [0, 0, 0, 0, 0, 0, 0, 1] }],
    ['2001:db8::8:800:200c:417a', { family: 6, v6: [0x2001, 0xdb8, 0, 0, 8, 0x800, 0x200c, 0x417a] }],
    ['fe80::1%eth0', { family: 6, v6: [0xfe80, 0, 0, 0, 0, 0, 0, 1] }],
    ['::', { family: 6, v6: [0, 0, 0, 0, 0, 0, 0, 0] }],
    ['64:ff9b::1.2.3.4', { family: 6, v6: [0x64, 0xff9b, 0, 0, 0, 0, 0x102, 0x304] }],
    ['1:2:3:4:5:6:7:8', { family: 6, v6: [1, 2, 3, 4, 5, 6, 7, 8] }],
    ['', undefined],
    ['unknown', undefined],
    ['256.0.0.1', undefined],
    ['1.2.3', undefined],
    ['1:2:3:4:5:6:7:8:9', undefined],
    ['1::2::3', undefined],
  ];
  for (const [input, expect] of cases) t.same(parseAddress(input), expect, input);
});

t.test('ranges', async (t) => {
  t.same(parseCidr('10.0.0.0/8'), { family: 4, bits: 8, v4: 0x0a000000, v6: [] });
  t.same(parseCidr('10.1.2.3/8'), { family: 4, bits: 8, v4: 0x0a000000, v6: [] }, 'host bits ignored');
  t.same(parseCidr('10.1.2.3'), { family: 4, bits: 32, v4: 0x0a010203, v6: [] }, 'bare address: one host');
  t.same(parseCidr('::ffff:10.0.0.0/104'), { family: 4, bits: 8, v4: 0x0a000000, v6: [] }, 'a mapped range is the IPv4 range');
  t.same(parseCidr('::ffff:10.1.1.1'), { family: 4, bits: 32, v4: 0x0a010101, v6: [] });
  t.same(parseCidr('2001:db8::/32')?.v6, [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0]);
  t.same(parseCidr('2001:db8:abcd::/36')?.v6, [0x2001, 0xdb8, 0xa000, 0, 0, 0, 0, 0]);
  for (const bad of ['10.0.0.0/33', '::/129', 'x/8', '10.0.0.0/', '10.0.0.0/a', '']) t.equal(parseCidr(bad), undefined, bad);
});

t.test('contains', async (t) => {
  const cases: [cidr: string, address: string, expect: boolean][] = [
    ['0.0.0.0/0', '203.0.113.9', true],
    ['0.0.0.0/0', '2001:db8::1', false],
    ['::/0', '2001:db8::1', true],
    ['::/0', '127.0.0.1', false],
    ['::/0', '::ffff:127.0.0.1', false],
    ['127.0.0.0/8', '::ffff:127.9.9.9', true],
    ['10.0.0.0/8', '10.255.255.255', true],
    ['10.0.0.0/8', '11.0.0.0', false],
    ['192.168.1.0/24', '192.168.1.77', true],
    ['192.168.1.0/24', '192.168.2.1', false],
    ['192.168.1.128/25', '192.168.1.127', false],
    ['192.168.1.128/25', '192.168.1.200', true],
    ['127.0.0.1', '127.0.0.1', true],
    ['127.0.0.1', '127.0.0.2', false],
    ['::ffff:127.0.0.1', '127.0.0.1', true],
    ['2001:db8::/32', '2001:db8:ffff::1', true],
    ['2001:db8::/32', '2001:db9::1', false],
    ['2001:db8:abcd::/36', '2001:db8:afff::1', true],
    ['2001:db8:abcd::/36', '2001:db8:b000::1', false],
    ['::1', '::1', true],
    ['::1/128', '::2', false],
    ['255.255.255.255/32', '255.255.255.255', true],
  ];
  for (const [cidr, address, expect] of cases) {
    t.equal(cidrContains(parseCidr(cidr)!, parseAddress(address)!), expect, `${cidr} ∋ ${address}`);
  }
});

t.test('sets', async (t) => {
  const { set, invalid } = compileCidrs(['10.0.0.0/8', 'bogus', '::1']);
  t.same(invalid, ['bogus']);
  t.equal(set.contains(parseAddress('10.1.1.1')!), true);
  t.equal(set.contains(parseAddress('::1')!), true);
  t.equal(set.contains(parseAddress('11.1.1.1')!), false);
  t.equal(set.everything, false);
  t.equal(compileCidrs(['0.0.0.0/0', '::/0']).set.everything, true);
  t.equal(compileCidrs(['0.0.0.0/0']).set.everything, false);
});
