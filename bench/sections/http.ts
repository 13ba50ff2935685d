/** HTTP/1.1, tiny responses (`http`): svcproxy's rows against direct, nginx, HAProxy and the Node proxies (bench/README.md). */
import path from 'node:path';
import { stats } from '../lib/fleet.js';
import { wrk } from '../lib/load.js';
import { httpRequest, sleep } from '../lib/proc.js';
import { fmtInt } from '../lib/report.js';
import { hostOf } from '../lib/svc.js';
import { opts } from '../options.js';
import { accessLines, expectFilters, expectOk, parseMetrics, settledEntries } from './checks.js';
import type { BenchRow, SectionSpec } from './table.js';

export function httpRows(tools: Record<string, string | undefined>): BenchRow[] {
  const missing = (tool: string): string | undefined => (tools[tool] ? undefined : `${tool} not installed`);
  const nginx = missing('nginx');
  const haproxy = missing('haproxy');
  const caddy = missing('caddy');
  return [
    { key: 'direct', name: 'direct (no proxy)', direct: true, proxy: [], deps: ['up-http'], target: (f) => ({ port: f.ports['up-http'] }) },
    { key: 'nginx', name: 'nginx, 1 worker, upstream keep-alive', proxy: ['nginx'], target: (f) => ({ port: f.ports.nginx }), ...(nginx ? { skip: nginx } : {}) },
    { key: 'haproxy', name: 'HAProxy, nbthread 1, http-reuse always', proxy: ['haproxy'], target: (f) => ({ port: f.ports.haproxy }), ...(haproxy ? { skip: haproxy } : {}) },
    { key: 'caddy', name: 'Caddy, GOMAXPROCS=1, reverse_proxy', proxy: ['caddy'], target: (f) => ({ port: f.ports.caddy }), ...(caddy ? { skip: caddy } : {}) },
    { key: 'hp3', name: 'http-proxy-3 1.23, keep-alive agent', proxy: ['hp3'], target: (f) => ({ port: f.ports.hp3 }) },
    { key: 'fastify', name: '@fastify/http-proxy 11 (fastify 5)', proxy: ['fastify'], target: (f) => ({ port: f.ports.fastify }) },
    { key: 'relay', name: 'Node byte relay (net, one upstream connection per client, pipe both ways)', proxy: ['relay'], target: (f) => ({ port: f.ports.relay }) },
    { key: 'sidecar', name: 'svcproxy sidecar, no tags', proxy: ['sc-plain'], target: (f) => ({ port: f.ports['sc-plain'] }) },
    { key: 'ingress', name: 'svcproxy ingress → app', proxy: ['ingress'], target: (f) => ({ port: f.ports.ingress, host: hostOf('api') }) },
  ];
}

export function httpSection(tools: Record<string, string | undefined>): SectionSpec {
  const rows: BenchRow[] = [
    ...httpRows(tools),
    {
      key: 'relay-tls',
      name: 'Node TLS relay (wrk → TLS 1.3 → tls server → plain upstream)',
      proxy: ['relay-tls'],
      target: (f) => ({ port: f.ports['relay-tls'], tls: true }),
    },
    { key: 'workers', name: 'svcproxy sidecar, no tags, --workers 2 (primary + 2 workers)', proxy: ['sc-workers'], target: (f) => ({ port: f.ports['sc-workers'] }) },
    { key: 'chain', name: 'svcproxy ingress → sidecar → app (2 processes)', proxy: ['ingress', 'sc-chain'], target: (f) => ({ port: f.ports.ingress, host: hostOf('chain') }) },
    {
      key: 'guarded',
      name: 'svcproxy sidecar, ext auth (gRPC) + rate limit',
      proxy: ['sc-guarded'],
      deps: ['authz', 'ratelimit'],
      sideCpu: { label: 'the auth server and the rate-limit service', services: ['authz', 'ratelimit'] },
      target: (f) => ({ port: f.ports['sc-guarded'] }),
      check: (_f, t) => expectFilters(t, { auth: true, rateLimit: true }),
    },
    {
      key: 'limited',
      name: 'svcproxy sidecar, rate limit only (svcproxy ratelimit, memory)',
      proxy: ['sc-limited'],
      deps: ['ratelimit'],
      sideCpu: { label: 'the rate-limit service', services: ['ratelimit'] },
      target: (f) => ({ port: f.ports['sc-limited'] }),
      check: (_f, t) => expectFilters(t, { auth: false, rateLimit: true }),
    },
    {
      key: 'authed',
      name: 'svcproxy sidecar, ext auth (gRPC) only',
      proxy: ['sc-authed'],
      deps: ['authz'],
      sideCpu: { label: 'the auth server', services: ['authz'] },
      target: (f) => ({ port: f.ports['sc-authed'] }),
      check: (_f, t) => expectFilters(t, { auth: true, rateLimit: false }),
    },
    {
      key: 'logged',
      name: 'svcproxy sidecar, access log (JSON lines to a file)',
      proxy: ['sc-logged'],
      target: (f) => ({ port: f.ports['sc-logged'] }),
      check: async (f, t) => {
        const ok = await expectOk(t);
        if (ok) return ok;
        // pino writes in 4 KiB batches: enough requests for a batch, then the lines must be there.
        const file = (await f.get('sc-logged')).procs[0]!.logFile;
        const before = accessLines(file).lines;
        for (let i = 0; i < 40; i++) await httpRequest(t.port);
        await sleep(200);
        const after = accessLines(file).lines;
        return after > before ? undefined : `no access-log line in ${path.basename(file)} after 40 requests`;
      },
      summary: async (f) => {
        const { lines, bytes } = accessLines((await f.get('sc-logged')).procs[0]!.logFile);
        return lines ? `${fmtInt(lines)} access-log lines (JSON, ${Math.round(bytes / lines)} bytes each) written to the sidecar's stdout, a file (pino, asynchronous, 4 KiB writes), over the section.` : undefined;
      },
      after: async (f) => (accessLines((await f.get('sc-logged')).procs[0]!.logFile).lines ? undefined : 'the sidecar wrote no access-log line'),
    },
    {
      key: 'als',
      name: 'svcproxy sidecar, Envoy access-log service (gRPC stream)',
      proxy: ['sc-als'],
      deps: ['als'],
      sideCpu: { label: 'the access-log sink', services: ['als'] },
      target: (f) => ({ port: f.ports['sc-als'] }),
      after: async (f) => {
        const s = await settledEntries(f);
        return s.entries ? undefined : 'the access-log sink received no entry';
      },
      summary: async (f) => {
        const s = await settledEntries(f);
        const m = parseMetrics((await httpRequest(f.ports['sc-als-admin'], { path: '/metrics' })).body);
        const sent = m.get('svcproxy_accesslog_entries_sent_total') ?? 0;
        const dropped = m.get('svcproxy_accesslog_entries_dropped_total') ?? 0;
        const failures = m.get('svcproxy_accesslog_stream_failures_total') ?? 0;
        return `the sink received ${fmtInt(s.entries)} entries in ${fmtInt(s.calls)} messages on ${s.streams ?? '?'} stream(s) (${s.calls ? Math.round(s.bytes / s.calls) : 0} bytes a message); the sidecar counted ${fmtInt(sent)} sent, ${fmtInt(dropped)} dropped, ${fmtInt(failures)} stream failures.`;
      },
    },
    {
      key: 'traced',
      name: 'svcproxy sidecar, tracing 100% (OTLP/gRPC sink)',
      proxy: ['sc-traced'],
      deps: ['otlp'],
      sideCpu: { label: 'the OTLP sink', services: ['otlp'] },
      target: (f) => ({ port: f.ports['sc-traced'] }),
      after: async (f) => {
        // The batch span processor exports every few seconds: give it time for the last batch.
        let s = await stats(f.ports['otlp-stats']);
        for (let i = 0; i < 30 && s.calls === 0; i++) {
          await sleep(200);
          s = await stats(f.ports['otlp-stats']);
        }
        return s.calls === 0 ? 'tracing not active in this build: the OTLP sink received no export' : undefined;
      },
    },
  ];
  return {
    id: 'http',
    title: 'HTTP/1.1, tiny responses',
    description: `wrk, 1 thread, ${opts.connections} connections, GET of a 2-byte answer from a Node upstream in its own process.`,
    unit: 'req/s',
    refs: [{ key: 'direct', label: 'direct' }, { key: 'hp3', label: 'http-proxy-3' }, { key: 'sidecar', label: 'sidecar no tags' }, { key: 'relay', label: 'Node relay' }],
    cpuRefs: [{ key: 'relay', label: 'Node relay' }],
    rows,
    drive: (t, seconds) => wrk({ url: `${t.tls ? 'https' : 'http'}://127.0.0.1:${t.port}/`, connections: opts.connections, seconds, ...(t.host ? { host: t.host } : {}) }),
    check: expectOk,
    notes: [
      'The ext auth, rate limit, access-log service and tracing rows count only the sidecar process; the auth server, the rate-limit service (in-memory counters) and the sinks run in their own processes on the same 2 cores (their CPU is in the notes below).',
      'nginx runs without an access log and svcproxy at --log-level warn (no access log either), except the access-log rows; HAProxy logs nothing.',
      'The Node relays (bench/peers/relay.ts) move bytes and nothing else: one upstream connection per client connection, `pipe` both ways, no parsing; the TLS one terminates TLS 1.3 (ECDSA P-256, self-signed) and relays the plaintext. They are the floor of a Node proxy on these sockets: "vs Node relay" is the share of that floor a row reaches, "CPU / req vs Node relay" how many times the relay\'s CPU a request costs it (the proxy process alone, utime + stime over the measured run). The TLS relay against the plain relay is Node\'s own price for TLS here.',
    ],
  };
}
