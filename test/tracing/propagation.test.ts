/**
 * Trace-context headers, table-driven: which format wins when several arrive, B3's deferred and
 * bare decisions and debug flag, and what is injected for each incoming format (stale headers
 * replaced or removed).
 */
import t from 'tap';
import { extract, inject, type Outgoing } from '../../src/tracing/propagation.js';

const TID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SID = '00f067aa0ba902b7';
const TP = `00-${TID}-${SID}-01`;

t.test('extract', async (t) => {
  const cases: [string, Record<string, string | string[]>, unknown][] = [
    ['nothing', {}, undefined],
    ['W3C sampled', { traceparent: TP }, { format: 'w3c', traceId: TID, spanId: SID, sampled: true, debug: false }],
    ['W3C with tracestate lines', { traceparent: TP, tracestate: ['a=1', 'b=2'] }, { format: 'w3c', traceState: 'a=1,b=2' }],
    ['W3C not sampled', { traceparent: `00-${TID}-${SID}-00` }, { sampled: false }],
    ['W3C beats B3', { traceparent: TP, b3: `${'1'.repeat(32)}-${'2'.repeat(16)}-0` }, { format: 'w3c', traceId: TID }],
    ['bad W3C falls back to B3', { traceparent: 'garbage', b3: `${TID}-${SID}-1` }, { format: 'b3', traceId: TID }],
    ['B3 single beats multi', { b3: `${TID}-${SID}`, 'x-b3-traceid': '1'.repeat(32), 'x-b3-spanid': '2'.repeat(16) }, { format: 'b3', traceId: TID, sampled: undefined }],
    ['B3 single debug', { b3: `${TID}-${SID}-d-${'3'.repeat(16)}` }, { format: 'b3', sampled: true, debug: true }],
    ['B3 single upper case', { b3: `${TID.toUpperCase()}-${SID.toUpperCase()}-1` }, { traceId: TID, spanId: SID }],
    ['B3 bare deny', { b3: '0' }, { format: 'b3', sampled: false, traceId: undefined }],
    ['B3 bad state', { b3: `${TID}-${SID}-x` }, undefined],
    ['B3 multi deferred', { 'x-b3-traceid': TID, 'x-b3-spanid': SID }, { format: 'b3multi', sampled: undefined }],
    ['B3 multi 64-bit', { 'x-b3-traceid': 'a2fb4a1d1a96d312', 'x-b3-spanid': SID, 'x-b3-sampled': 'true' }, { traceId: `0000000000000000a2fb4a1d1a96d312`, sampled: true }],
    ['B3 multi debug', { 'x-b3-traceid': TID, 'x-b3-spanid': SID, 'x-b3-flags': '1', 'x-b3-sampled': '0' }, { sampled: true, debug: true }],
    ['B3 multi decision only', { 'x-b3-sampled': '0' }, { format: 'b3multi', sampled: false, traceId: undefined }],
    ['B3 multi bad sampled', { 'x-b3-traceid': TID, 'x-b3-spanid': SID, 'x-b3-sampled': 'maybe' }, undefined],
    ['B3 multi missing span', { 'x-b3-traceid': TID }, undefined],
  ];
  for (const [name, headers, expected] of cases) {
    if (expected === undefined) t.equal(extract(headers), undefined, name);
    else t.match(extract(headers), expected, name);
  }
});

t.test('inject', async (t) => {
  const ctx: Outgoing = { traceId: TID, spanId: 'b7ad6b7169203331', sampled: true, debug: false };
  const stale = { traceparent: TP, tracestate: 'old=1', b3: 'x', 'x-b3-traceid': 'x', 'x-b3-spanid': 'x', 'x-b3-parentspanid': 'x', 'x-b3-sampled': '0', 'x-b3-flags': '1' };

  const w3c: Record<string, string> = { ...stale };
  inject(w3c, ctx, 'w3c');
  t.equal(w3c.traceparent, `00-${TID}-b7ad6b7169203331-01`);
  t.notOk('tracestate' in w3c, 'no tracestate when the span has none');
  t.equal(w3c.b3, 'x', 'formats the caller did not use are left alone');

  const single: Record<string, string> = {};
  inject(single, { ...ctx, sampled: false, traceState: 'a=1' }, 'b3');
  t.same(single, { traceparent: `00-${TID}-b7ad6b7169203331-00`, tracestate: 'a=1', b3: `${TID}-b7ad6b7169203331-0` });

  const debug: Record<string, string> = {};
  inject(debug, { ...ctx, debug: true }, 'b3');
  t.equal(debug.b3, `${TID}-b7ad6b7169203331-d`);

  const multi: Record<string, string> = { ...stale };
  inject(multi, ctx, 'b3multi');
  t.match(multi, { 'x-b3-traceid': TID, 'x-b3-spanid': 'b7ad6b7169203331', 'x-b3-sampled': '1' });
  t.notOk('x-b3-parentspanid' in multi);
  t.notOk('x-b3-flags' in multi);

  const multiDebug: Record<string, string> = { 'x-b3-sampled': '1' };
  inject(multiDebug, { ...ctx, debug: true }, 'b3multi');
  t.equal(multiDebug['x-b3-flags'], '1');
  t.notOk('x-b3-sampled' in multiDebug, 'debug implies sampled and is sent alone');
});
