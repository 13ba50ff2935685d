/**
 * The OTLP exporter's delivery against real collectors on port 0 (an HTTP server for OTLP/HTTP,
 * svcproxy's unary gRPC server for OTLP/gRPC): retryable answers are retried with backoff, up to 5
 * attempts, within the export's timeout; Retry-After is honored; anything else fails at once. The
 * exporter's clock runs 100 times faster than real time (its timers fire after ms / 100), so the
 * 1–5 s waits take milliseconds and every wait the exporter asks for is recorded. Exports that
 * should succeed get a long timeout (10 minutes of that clock, 6 s of real time), so a loaded
 * machine cannot use it up.
 */
import t, { type Test } from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { OtlpExporter, EXPORT_PATH } from '../../src/tracing/otlp.js';
import { RpcError, startUnaryServer } from '../../src/grpc/server.js';
import { Status } from '../../src/grpc/unary.js';
import type { Clock } from '../../src/deps.js';
import type { ExporterSpec } from '../../src/tracing/config.js';

const SPEED = 100;
const BODY = Buffer.from([0x0a, 0x00]);

/** A clock 100× faster than real time that records the delays asked of it. */
function fastClock(): Clock & { readonly waits: number[] } {
  const start = performance.now();
  const waits: number[] = [];
  return {
    waits,
    now: () => (performance.now() - start) * SPEED,
    wallNow: () => Date.now(),
    setTimeout: (fn, ms) => {
      waits.push(ms);
      return setTimeout(fn, ms / SPEED);
    },
    clearTimeout: (timer) => clearTimeout(timer as ReturnType<typeof setTimeout> | undefined),
  };
}

const LONG = 600_000;
/** Waits between attempts (at most 5 s; the gRPC call's own timeouts are the long ones). */
const backoffs = (clock: { waits: number[] }): number[] => clock.waits.filter((w) => w <= 10_000);

async function httpCollector(t: Test, answers: { status: number; headers?: Record<string, string> }[]): Promise<{ url: string; requests: Buffer[] }> {
  const requests: Buffer[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests.push(Buffer.concat(chunks));
      const a = answers[Math.min(requests.length - 1, answers.length - 1)]!;
      res.writeHead(a.status, a.headers).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`, requests };
}

function spec(protocol: 'http' | 'grpc', url: string): ExporterSpec {
  return { key: `test-${protocol}`, protocol, url, ratio: 1 };
}

t.test('OTLP/HTTP: 503 and 502 are retried with a growing, jittered backoff; the body arrives', async (t) => {
  const c = await httpCollector(t, [{ status: 503 }, { status: 502 }, { status: 200 }]);
  const clock = fastClock();
  const exporter = new OtlpExporter(spec('http', c.url), LONG, clock);
  t.teardown(() => exporter.shutdown());
  await exporter.export(BODY);
  t.equal(c.requests.length, 3, 'three attempts');
  t.ok(c.requests.every((b) => b.equals(BODY)), 'the same body each time');
  const [first, second] = backoffs(clock);
  t.ok(first! >= 800 && first! <= 1200, `first wait ~1 s (${first})`);
  t.ok(second! >= 1200 && second! <= 1800, `second wait ~1.5 s (${second})`);
});

t.test('OTLP/HTTP: Retry-After decides the wait', async (t) => {
  const c = await httpCollector(t, [{ status: 429, headers: { 'retry-after': '3' } }, { status: 200 }]);
  const clock = fastClock();
  const exporter = new OtlpExporter(spec('http', c.url), LONG, clock);
  t.teardown(() => exporter.shutdown());
  await exporter.export(BODY);
  t.equal(c.requests.length, 2);
  t.same(backoffs(clock), [3000]);
});

t.test('OTLP/HTTP: a non-retryable status fails the export at once', async (t) => {
  const c = await httpCollector(t, [{ status: 400 }]);
  const exporter = new OtlpExporter(spec('http', c.url), LONG, fastClock());
  t.teardown(() => exporter.shutdown());
  await t.rejects(exporter.export(BODY), /OTLP\/HTTP export failed: HTTP 400/);
  t.equal(c.requests.length, 1);
});

t.test('OTLP/HTTP: at most 5 attempts', async (t) => {
  const c = await httpCollector(t, [{ status: 503 }]);
  const exporter = new OtlpExporter(spec('http', c.url), LONG, fastClock());
  t.teardown(() => exporter.shutdown());
  await t.rejects(exporter.export(BODY), /HTTP 503/);
  t.equal(c.requests.length, 5);
});

t.test('OTLP/HTTP: no retry that would end after the export timeout', async (t) => {
  const c = await httpCollector(t, [{ status: 503, headers: { 'retry-after': '10' } }]);
  const exporter = new OtlpExporter(spec('http', c.url), 5_000, fastClock());
  t.teardown(() => exporter.shutdown());
  await t.rejects(exporter.export(BODY), /HTTP 503 \(no time left to retry\)/);
  t.equal(c.requests.length, 1);
});

t.test('OTLP/gRPC: UNAVAILABLE is retried, INVALID_ARGUMENT is not', async (t) => {
  const calls: Buffer[] = [];
  let answers: number[] = [Status.UNAVAILABLE, Status.OK];
  const server = await startUnaryServer({
    host: '127.0.0.1',
    port: 0,
    maxMessageBytes: 1 << 20,
    methods: new Map([
      [
        EXPORT_PATH,
        async (request: Buffer): Promise<Buffer> => {
          calls.push(request);
          const code = answers[Math.min(calls.length - 1, answers.length - 1)]!;
          if (code !== Status.OK) throw new RpcError(code, 'collector says no');
          return Buffer.alloc(0);
        },
      ],
    ]),
  });
  t.teardown(() => server.close(100));
  const clock = fastClock();
  const exporter = new OtlpExporter(spec('grpc', `http://127.0.0.1:${server.address.port}`), LONG, clock);
  t.teardown(() => exporter.shutdown());

  await exporter.export(BODY);
  t.equal(calls.length, 2, 'one retry');
  t.ok(calls.every((b) => b.equals(BODY)));
  const [wait] = backoffs(clock);
  t.ok(wait! >= 800 && wait! <= 1200, `waited ~1 s (${wait})`);

  calls.length = 0;
  answers = [Status.INVALID_ARGUMENT];
  await t.rejects(exporter.export(BODY), /OTLP\/gRPC export failed: collector says no \(gRPC status 3\)/);
  t.equal(calls.length, 1, 'not retried');
});
