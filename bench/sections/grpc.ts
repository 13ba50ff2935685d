/** gRPC unary (`grpc`) through the proxies, to the raw-bytes echo service (bench/README.md). */
import { script } from '../lib/fleet.js';
import { nodeClient } from '../lib/load.js';
import { hostOf } from '../lib/svc.js';
import { opts } from '../options.js';
import type { SectionSpec } from './table.js';

export function grpcSection(): SectionSpec {
  return {
    id: 'grpc',
    duration: opts.shortDuration,
    title: 'gRPC unary',
    description: `A Node @grpc/grpc-js client (bench/clients/grpc-load.ts) keeping ${opts.grpcConcurrency} unary calls in flight on one channel, 64-byte messages, against a grpc-js echo server. svcproxy's workload port has protocol grpc (h2c both ways, trailers passed through). The client shares the 2 cores and is often the limit.`,
    unit: 'calls/s',
    refs: [{ key: 'direct', label: 'direct' }],
    rows: [
      { key: 'direct', name: 'direct (grpc-js server)', direct: true, proxy: [], deps: ['up-grpc'], target: (f) => ({ port: f.ports['up-grpc'] }) },
      { key: 'sidecar', name: 'svcproxy sidecar (port protocol grpc)', proxy: ['sc-grpc'], target: (f) => ({ port: f.ports['sc-grpc'] }) },
      { key: 'ingress', name: 'svcproxy ingress → app (port protocol grpc)', proxy: ['ingress'], target: (f) => ({ port: f.ports.ingress, host: hostOf('grpc') }) },
    ],
    drive: (t, seconds) => nodeClient(script('clients/grpc-load.js'), [t.port, t.host ?? `127.0.0.1:${t.port}`, opts.grpcConcurrency, seconds], seconds),
  };
}
