/** HTTP/2 (`h2`), driven by h2load (bench/README.md). */
import { h2load } from '../lib/load.js';
import { hostOf } from '../lib/svc.js';
import { opts } from '../options.js';
import { expectH2 } from './checks.js';
import type { SectionSpec } from './table.js';

export function h2Section(tools: Record<string, string | undefined>): SectionSpec {
  const missing = (tool: string): { skip: string } | object => (tools[tool] ? {} : { skip: `${tool} not installed` });
  return {
    id: 'h2',
    duration: opts.shortDuration,
    title: 'HTTP/2 (h2c, prior knowledge)',
    description: `h2load, 1 thread, ${opts.h2Clients} connections × ${opts.h2Streams} concurrent streams, GET of a 2-byte answer. Proxies speak h2c to the client and HTTP/1.1 keep-alive to the upstream unless the row says otherwise. Percentiles from h2load's per-request log. http-proxy-3 and @fastify/http-proxy do not serve h2c. The runtime's floor here is the direct h2c upstream (Node's own http2 server answering; a byte relay has no HTTP/2 twin: it would pass the client's h2c through to an HTTP/1.1 app). nginx keeps its connections for 10^6 requests (keepalive_requests, which governs HTTP/2 connections too since nginx 1.19.7, replacing http2_max_requests), so it does not close every 1,000 requests.`,
    unit: 'req/s',
    refs: [{ key: 'direct', label: 'direct h2c' }, { key: 'nginx', label: 'nginx' }],
    rows: [
      { key: 'direct', name: 'direct h2c upstream (Node http2)', direct: true, proxy: [], deps: ['up-h2c'], target: (f) => ({ port: f.ports['up-h2c'] }) },
      { key: 'nginx', name: 'nginx, listen … http2 → HTTP/1.1 upstream', proxy: ['nginx'], target: (f) => ({ port: f.ports['nginx-h2'] }), ...missing('nginx') },
      { key: 'haproxy', name: 'HAProxy, bind … proto h2 → HTTP/1.1 upstream', proxy: ['haproxy'], target: (f) => ({ port: f.ports['haproxy-h2'] }), ...missing('haproxy') },
      { key: 'sidecar', name: 'svcproxy sidecar → HTTP/1.1 app', proxy: ['sc-plain'], target: (f) => ({ port: f.ports['sc-plain'] }) },
      { key: 'ingress', name: 'svcproxy ingress → HTTP/1.1 app', proxy: ['ingress'], target: (f) => ({ port: f.ports.ingress, host: hostOf('api') }) },
      { key: 'sidecar-h2', name: 'svcproxy sidecar → h2c app (port protocol http2)', proxy: ['sc-h2'], target: (f) => ({ port: f.ports['sc-h2'] }) },
    ],
    drive: (t, seconds) => h2load({ url: `http://127.0.0.1:${t.port}/`, clients: opts.h2Clients, streams: opts.h2Streams, seconds, ...(t.host ? { authority: t.host } : {}) }),
    check: expectH2,
  };
}
