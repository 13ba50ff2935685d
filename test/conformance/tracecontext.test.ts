/**
 * Trace-context conformance: our header parsers against OpenTelemetry's own propagators as oracles,
 * over thousands of generated headers, valid and malformed (seeded, so a failure reproduces).
 * W3C `traceparent`/`tracestate` must read exactly as @opentelemetry/core's W3CTraceContextPropagator
 * reads them; B3 (single and multi) must never accept what @opentelemetry/propagator-b3 rejects and
 * must agree on ids and decisions where both accept. What we inject, the oracles read back.
 */
import t from 'tap';
import { ROOT_CONTEXT, defaultTextMapGetter, trace, TraceFlags } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { B3Propagator } from '@opentelemetry/propagator-b3';
import { extract, inject, parseB3Single, parseB3Multi, parseTraceparent } from '../../src/tracing/propagation.js';
import { traceStateOf } from '../../src/tracing/tracer.js';

function prng(seed: number): () => number {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const random = prng(0x5eed);
const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
const hex = (n: number, alphabet = '0123456789abcdef'): string => Array.from({ length: n }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');

/** A traceparent that is valid, or broken in one of many ways. */
function traceparent(): string {
  if (random() < 0.4) return `${pick(['00', '00', '01', 'cc'])}-${hex(32)}-${hex(16)}-${hex(2)}`;
  let version = pick(['00', '00', '00', '01', 'cc', 'fe', 'ff', '0', '000', 'zz']);
  let traceId = pick([hex(32), hex(32), hex(32), '0'.repeat(32), hex(31), hex(33), hex(32).toUpperCase(), hex(31) + 'g']);
  let spanId = pick([hex(16), hex(16), hex(16), '0'.repeat(16), hex(15), hex(17), hex(16).toUpperCase()]);
  let flags = pick(['01', '00', '03', 'ff', hex(2), '1', '001', 'x1']);
  if (random() < 0.05) version = '';
  if (random() < 0.03) traceId = '';
  if (random() < 0.03) spanId = '';
  if (random() < 0.03) flags = '';
  const sep = (): string => (random() < 0.03 ? pick(['_', '', '--', ' ']) : '-');
  let value = `${version}${sep()}${traceId}${sep()}${spanId}${sep()}${flags}`;
  if (random() < 0.15) value += pick(['-', '-extra', '-' + hex(8), 'x', ' -a', '.']);
  if (random() < 0.1) value = pick([' ', '  ', '\t']) + value;
  if (random() < 0.1) value += pick([' ', '  ', '\t']);
  return value;
}

function tracestate(): string {
  const key = (): string => pick([hex(4, 'abcdefghijklmnopqrstuvwxyz'), `${hex(3, 'abcdef')}@${hex(2, 'xyz')}`, 'Upper', '1bad', 'a'.repeat(300), 'ok_key-*/']);
  const value = (): string => pick([hex(6), 'v=1', 'spaced value', 'x'.repeat(257), '', 'ok!~']);
  const n = Math.floor(random() * 36);
  return Array.from({ length: n }, () => `${key()}=${value()}`).join(pick([',', ', ', ' ,', ',,']));
}

const w3c = new W3CTraceContextPropagator();

t.test('traceparent and tracestate read exactly as @opentelemetry/core reads them', async (t) => {
  let valid = 0;
  let checked = 0;
  for (let i = 0; i < 5000; i++) {
    const headers: Record<string, string | string[]> = { traceparent: traceparent() };
    if (random() < 0.5) headers.tracestate = tracestate();
    if (random() < 0.05) headers.traceparent = [headers.traceparent as string, traceparent()];
    const oracle = trace.getSpanContext(w3c.extract(ROOT_CONTEXT, headers, defaultTextMapGetter));
    const ours = extract(headers);
    const oracleValid = oracle !== undefined && trace.isSpanContextValid(oracle);
    checked++;
    if (oracleValid !== (ours !== undefined)) {
      t.fail(`validity differs for ${JSON.stringify(headers)}: oracle ${oracleValid}, ours ${ours !== undefined}`);
      continue;
    }
    if (!oracle || !ours) continue;
    valid++;
    if (ours.traceId !== oracle.traceId || ours.spanId !== oracle.spanId || ours.sampled !== ((oracle.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED)) {
      t.fail(`context differs for ${JSON.stringify(headers)}`);
      continue;
    }
    const ourState = ours.traceState === undefined ? undefined : traceStateOf(ours.traceState).serialize();
    const oracleState = oracle.traceState?.serialize();
    if ((ourState || undefined) !== (oracleState || undefined)) t.fail(`tracestate differs for ${JSON.stringify(headers).slice(0, 300)}`);
  }
  t.ok(valid > 500 && valid < checked - 500, `${checked} headers checked, ${valid} valid: both kinds well represented`);
});

t.test('W3C test vectors', async (t) => {
  const cases: [string, boolean][] = [
    ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', true],
    ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00', true],
    ['cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds', true],
    ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-', false],
    ['ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', false],
    ['00-00000000000000000000000000000000-00f067aa0ba902b7-01', false],
    ['00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01', false],
    ['00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01', false],
    ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7', false],
    ['', false],
  ];
  for (const [value, ok] of cases) t.equal(parseTraceparent(value) !== undefined, ok, value || '(empty)');
});

t.test('what we inject, the W3C and B3 propagators read back', async (t) => {
  for (let i = 0; i < 200; i++) {
    const ctx = { traceId: hex(32), spanId: hex(16), sampled: random() < 0.5, debug: false, traceState: 'a=1,b=2' };
    for (const format of ['w3c', 'b3', 'b3multi'] as const) {
      const headers: Record<string, string> = {};
      inject(headers, ctx, format);
      const w = trace.getSpanContext(w3c.extract(ROOT_CONTEXT, headers, defaultTextMapGetter))!;
      t.ok(w.traceId === ctx.traceId && w.spanId === ctx.spanId && (w.traceFlags & 1) === (ctx.sampled ? 1 : 0), `w3c after ${format}`) || t.bailout();
      t.equal(w.traceState?.serialize(), 'a=1,b=2');
      if (format === 'w3c') continue;
      const b3 = new B3Propagator();
      const b = trace.getSpanContext(b3.extract(ROOT_CONTEXT, headers, defaultTextMapGetter))!;
      t.ok(b.traceId === ctx.traceId && b.spanId === ctx.spanId && (b.traceFlags & 1) === (ctx.sampled ? 1 : 0), `${format} read back`) || t.bailout();
    }
  }
});

t.test('B3 single: never more lenient than @opentelemetry/propagator-b3, same ids and decision', async (t) => {
  // B3Propagator reads the single header first, then the multi ones; each test sends one kind.
  const single = new B3Propagator();
  let accepted = 0;
  for (let i = 0; i < 3000; i++) {
    const traceId = pick([hex(32), hex(16), hex(16), hex(24), hex(15), '0'.repeat(32), '0'.repeat(16)]);
    const spanId = pick([hex(16), hex(16), hex(15), '0'.repeat(16)]);
    const state = pick([undefined, '1', '0', 'd', 'x', '2']);
    const parent = pick([undefined, undefined, hex(16), hex(3)]);
    let value = [traceId, spanId, ...(state === undefined ? (parent ? ['1'] : []) : [state]), ...(parent ? [parent] : [])].join('-');
    if (random() < 0.1) value = pick(['0', '1', 'd', 'x', '']);
    const oracle = trace.getSpanContext(single.extract(ROOT_CONTEXT, { b3: value }, defaultTextMapGetter));
    const ours = parseB3Single(value);
    if (!ours?.traceId) continue;
    accepted++;
    if (!oracle) {
      t.fail(`we accept ${value}, the oracle does not`);
      continue;
    }
    const oracleSampled = (oracle.traceFlags & 1) === 1;
    if (ours.traceId !== oracle.traceId || ours.spanId !== oracle.spanId || (ours.sampled ?? false) !== oracleSampled) t.fail(`differs for ${value}`);
  }
  t.ok(accepted > 200, `${accepted} accepted`);
  t.same(parseB3Single('1'), { format: 'b3', sampled: true, debug: false }, 'a bare decision');
  t.same(parseB3Single('0'), { format: 'b3', sampled: false, debug: false });
  t.equal(parseB3Single(`${hex(32)}-${hex(16)}`)!.sampled, undefined, 'no decision: deferred');
  t.equal(parseB3Single(`${hex(32)}-${hex(16)}-d`)!.debug, true);
});

t.test('B3 multi: never more lenient than @opentelemetry/propagator-b3, same ids and decision', async (t) => {
  const multi = new B3Propagator();
  let accepted = 0;
  for (let i = 0; i < 3000; i++) {
    const headers: Record<string, string> = {};
    const traceId = pick([hex(32), hex(16), hex(15), hex(33), '0'.repeat(32), undefined]);
    const spanId = pick([hex(16), hex(16), hex(15), '0'.repeat(16), undefined]);
    const sampled = pick([undefined, '1', '0', 'true', 'false', 'True', 'yes', '2']);
    const flags = pick([undefined, undefined, '1', '0']);
    if (traceId !== undefined) headers['x-b3-traceid'] = traceId;
    if (spanId !== undefined) headers['x-b3-spanid'] = spanId;
    if (sampled !== undefined) headers['x-b3-sampled'] = sampled;
    if (flags !== undefined) headers['x-b3-flags'] = flags;
    const oracle = trace.getSpanContext(multi.extract(ROOT_CONTEXT, headers, defaultTextMapGetter));
    const ours = parseB3Multi(headers);
    if (!ours?.traceId) continue;
    accepted++;
    if (!oracle) {
      t.fail(`we accept ${JSON.stringify(headers)}, the oracle does not`);
      continue;
    }
    if (ours.traceId !== oracle.traceId || ours.spanId !== oracle.spanId || (ours.sampled ?? false) !== ((oracle.traceFlags & 1) === 1)) {
      t.fail(`differs for ${JSON.stringify(headers)}`);
    }
  }
  t.ok(accepted > 200, `${accepted} accepted`);
});
