/** The mesh (`mesh`): two proxies, plaintext against mTLS between the sidecars (bench/README.md). */
import { Fleet, type PortName } from '../lib/fleet.js';
import { wrk } from '../lib/load.js';
import { handshakes, internalHost, meshRequests, MESH_ORG } from '../lib/mesh.js';
import { fmtInt } from '../lib/report.js';
import { hostOf } from '../lib/svc.js';
import { opts } from '../options.js';
import { expectOk } from './checks.js';
import type { SectionSpec, Target } from './table.js';

/** A mesh row's hop is what it claims: mTLS handshakes and admitted mesh requests on the target, or none of either. */
async function expectMesh(f: Fleet, t: Target, admins: { caller: PortName; target: PortName }, tls: boolean): Promise<string | undefined> {
  const before = await meshRequests(f.ports[admins.target]);
  const ok = await expectOk(t);
  if (ok) return ok;
  const [admitted, caller, target] = [(await meshRequests(f.ports[admins.target])) - before, await handshakes(f.ports[admins.caller]), await handshakes(f.ports[admins.target])];
  if (tls && (admitted < 1 || caller.client < 1 || target.server < 1)) return `the request did not cross mTLS (target admitted ${admitted}, caller dialled ${caller.client}, target accepted ${target.server} handshakes)`;
  if (!tls && (admitted > 0 || caller.client + target.server > 0)) return 'the plaintext control went over mTLS';
  return undefined;
}

export function meshSection(): SectionSpec {
  const host = internalHost();
  const hs = (caller: PortName, target: PortName) => async (f: Fleet): Promise<Record<string, number>> => ({
    'client handshakes (caller)': (await handshakes(f.ports[caller])).client,
    'server handshakes (target)': (await handshakes(f.ports[target])).server,
  });
  const total = (caller: PortName, target: PortName) => async (f: Fleet): Promise<string> => {
    const [c, t] = [await handshakes(f.ports[caller]), await handshakes(f.ports[target])];
    return `since start (warm-ups and checks included) the caller dialled ${fmtInt(c.client)} mTLS connections and the target accepted ${fmtInt(t.server)}; the target admitted ${fmtInt(await meshRequests(f.ports[target]))} mesh requests.`;
  };
  return {
    id: 'mesh',
    title: 'The mesh: two proxies, plaintext against mTLS',
    description: `wrk, 1 thread, ${opts.connections} connections, GET of a 2-byte answer from the same Node upstream as the HTTP table; every row is two svcproxy processes (--workers 1) and counts the CPU and RSS of both. The mesh rows' wrk is the caller workload's app: it talks to its sidecar's outbound listener (\`--mesh\`) with the target's internal name as Host (\`${host}\`), as an HTTP proxy client would; the caller sidecar sends it over mTLS (HTTP/1.1 over TLS 1.3, pooled keep-alive connections, ECDSA P-256 certificates from svcproxy's local CA) to the target replica's sidecar (\`--mesh-inbound\`), which checks the caller's identity against the internal firewall (same-org), adds x-forwarded-client-cert and forwards to its app. An ingress's external listener never takes the mesh hop (only internal names from a mesh listener do), so the literal ingress → sidecar → (mTLS) → sidecar → app does not exist; the last row is the nearest: the ingress's own mesh listener calling as spiffe://${MESH_ORG}/ingress.`,
    unit: 'req/s',
    refs: [{ key: 'chain', label: 'ingress → sidecar (plain)' }, { key: 'mesh-plain', label: 'sidecar → sidecar (plain)' }],
    rows: [
      { key: 'chain', name: 'svcproxy ingress → sidecar → app (plaintext; the HTTP table row)', proxy: ['ingress', 'sc-chain'], target: (f) => ({ port: f.ports.ingress, host: hostOf('chain') }) },
      {
        key: 'mesh-plain',
        name: 'caller sidecar (outbound) → plaintext → target sidecar → app',
        proxy: ['sc-pcall', 'sc-ptarget'],
        target: (f) => ({ port: f.ports['sc-pcall-out'], host }),
        check: (f, t) => expectMesh(f, t, { caller: 'sc-pcall-admin', target: 'sc-ptarget-admin' }, false),
      },
      {
        key: 'mesh',
        name: 'caller sidecar (outbound) → mTLS → target sidecar → app',
        proxy: ['sc-mcall', 'sc-mtarget'],
        target: (f) => ({ port: f.ports['sc-mcall-out'], host }),
        check: (f, t) => expectMesh(f, t, { caller: 'sc-mcall-admin', target: 'sc-mtarget-admin' }, true),
        counters: hs('sc-mcall-admin', 'sc-mtarget-admin'),
        summary: total('sc-mcall-admin', 'sc-mtarget-admin'),
      },
      {
        key: 'mesh-ingress',
        name: 'ingress mesh listener → mTLS → target sidecar → app',
        proxy: ['ingress-mesh', 'sc-itarget'],
        target: (f) => ({ port: f.ports['ingress-mesh-out'], host }),
        check: (f, t) => expectMesh(f, t, { caller: 'ingress-mesh-admin', target: 'sc-itarget-admin' }, true),
        counters: hs('ingress-mesh-admin', 'sc-itarget-admin'),
        summary: total('ingress-mesh-admin', 'sc-itarget-admin'),
      },
    ],
    drive: (t, seconds) => wrk({ url: `http://127.0.0.1:${t.port}/`, connections: opts.connections, seconds, ...(t.host ? { host: t.host } : {}) }),
    check: expectOk,
    notes: [
      'Handshakes are svcproxy_mesh_tls_handshakes_total from the two processes\' admin /metrics, read just before and just after each measured run: client = connections the caller dialled, server = handshakes the target completed. With the pool warm (wrk\'s warm-up second) both should stay near 0.',
    ],
  };
}
