/**
 * HTTPS at the ingress (`https`): the ingress's TLS listener against nginx's with the same
 * certificate, TLS 1.3 and cipher suite, and against the Node TLS relay (the runtime's floor), with
 * keep-alive and with a new connection (a full handshake) per request (bench/README.md).
 */
import { httpRequest } from '../lib/proc.js';
import { hostOf } from '../lib/svc.js';
import { wrk } from '../lib/load.js';
import { opts } from '../options.js';
import { expectOk } from './checks.js';
import type { BenchRow, SectionSpec, Target } from './table.js';
import type { Fleet } from '../lib/fleet.js';

/** The TLS protocol and cipher suite a row's listener negotiates with OpenSSL's default client order. */
async function negotiated(t: Target): Promise<string | undefined> {
  const r = await httpRequest(t.port, { tls: true, ...(t.host ? { host: t.host } : {}) });
  return `negotiated ${r.tlsProtocol ?? '?'}, ${r.tlsCipher ?? '?'}`;
}

/** A row's key in the keep-alive table, or in the new-connection one (`…-close`). */
const keyOf = (key: string, close: boolean): string => (close ? `${key}-close` : key);

function rows(tools: Record<string, string | undefined>, close: boolean): BenchRow[] {
  const nginx = tools.nginx ? {} : { skip: 'nginx not installed' };
  const api = hostOf('api');
  const secure = (key: string, name: string, proxy: string, target: (f: Fleet) => Target, extra: Partial<BenchRow> = {}): BenchRow =>
    ({ key: keyOf(key, close), name, proxy: [proxy], target, summary: (f) => negotiated(target(f)).catch(() => undefined), ...extra });
  const out: BenchRow[] = [
    secure('nginx-tls', 'nginx, 1 worker, HTTPS (TLS 1.3)', 'nginx', (f) => ({ port: f.ports['nginx-tls'], tls: true, close }), nginx),
    secure('relay-tls', 'Node TLS relay (tls server → plain upstream)', 'relay-tls', (f) => ({ port: f.ports['relay-tls'], tls: true, close })),
    secure('ingress-tls', 'svcproxy ingress → app, HTTPS (--listen-tls)', 'ingress-tls', (f) => ({ port: f.ports['ingress-tls-secure'], host: api, tls: true, close })),
    secure('ingress-tls2', 'svcproxy ingress → app, HTTPS, --workers 2 (primary + 2 workers)', 'ingress-tls2', (f) => ({ port: f.ports['ingress-tls2-secure'], host: api, tls: true, close })),
  ];
  if (!close) {
    // The same processes' plaintext listeners: each proxy's own price for TLS on this machine.
    out.push(
      { key: 'nginx-plain', name: 'nginx, 1 worker, HTTP (the same process, plaintext)', proxy: ['nginx'], target: (f) => ({ port: f.ports.nginx }), ...nginx },
      { key: 'ingress-plain', name: 'svcproxy ingress → app, HTTP (the same process, plaintext)', proxy: ['ingress-tls'], target: (f) => ({ port: f.ports['ingress-tls'], host: api }) },
    );
  }
  return out;
}

/** The keep-alive table and the new-connection-per-request one; each row of the second is keyed `…-close`. */
export function httpsSections(tools: Record<string, string | undefined>): SectionSpec[] {
  const spec = (close: boolean): SectionSpec => {
    const k = (key: string): string => keyOf(key, close);
    return {
      id: 'https',
      title: close ? 'HTTPS at the ingress, a new connection per request' : 'HTTPS at the ingress, keep-alive',
      description: `wrk, 1 thread, ${opts.connections} connections, GET of a 2-byte answer from the HTTP table's Node upstream, over TLS 1.3 (the bench's self-signed ECDSA P-256 certificate on every row; wrk sends no ALPN, so every row speaks HTTP/1.1)${close ? ', every request with `Connection: close`: each one a new TCP connection and a full TLS 1.3 handshake (wrk does not resume sessions)' : ', keep-alive'}.`,
      unit: 'req/s',
      refs: [{ key: k('nginx-tls'), label: 'nginx HTTPS' }, { key: k('relay-tls'), label: 'Node TLS relay' }],
      cpuRefs: [{ key: k('nginx-tls'), label: 'nginx HTTPS' }, { key: k('relay-tls'), label: 'Node TLS relay' }],
      rows: rows(tools, close),
      drive: (t, seconds) => wrk({
        url: `${t.tls ? 'https' : 'http'}://127.0.0.1:${t.port}/`, connections: opts.connections, seconds,
        ...(t.host ? { host: t.host } : {}), ...(t.close ? { headers: ['Connection: close'] } : {}),
      }),
      check: expectOk,
      notes: [
        'Every TLS row uses the same certificate and key; nginx is limited to TLSv1.3 (`ssl_protocols TLSv1.3`) and every server takes the client\'s suite order, so each row negotiates the same suite (the note under each row).',
        'The ingress rows are `svcproxy ingress --listen-tls … --tls-cert … --tls-key …` (ALPN h2 and http/1.1; wrk offers none, so HTTP/1.1); the plaintext rows are the same processes\' `--listen` ports. CPU is the proxy\'s processes only (for --workers 2, the primary and both workers).',
      ],
    };
  };
  return [spec(false), spec(true)];
}
