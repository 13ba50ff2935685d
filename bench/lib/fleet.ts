/**
 * Every process a bench row needs, started on demand (once) and stopped by name: the upstreams and
 * outside services (kept for the whole run), the peers and the svcproxy roles (restarted for each
 * section, so each section's memory figures start from a fresh process). Ports are chosen up front,
 * so the svcproxy records can name them before anything starts.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { canConnect, commandExists, freePorts, httpRequest, spawnProc, waitUntil, type Proc } from './proc.js';
import { startCaddy, startHaproxy, startNginx } from './peers.js';
import { CALLER, MESHED, internalHost, issueMeshFiles, meshArgs, writeMeshConfig, type MeshConfig } from './mesh.js';
import {
  ALS_GVC, APP_ROOT, GVC, TRACED_GVC, hostOf, ingressArgs, launchSvc, scaleName, sidecarArgs, waitReady, writeMainConfig, writeScaleConfig,
  type MainConfig,
} from './svc.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const DIST = path.resolve(HERE, '..');
export const script = (rel: string): string => path.join(DIST, rel);

export interface Handle {
  name: string;
  port: number;
  /** h2c port of nginx / HAProxy. */
  h2Port?: number;
  /** Stats port of the auth server, the OTLP sink and the access-log sink. */
  statsPort?: number;
  procs: Proc[];
}

/** Services that outlive a section (not proxies: their memory is not reported). */
export const BACKENDS = new Set(['up-http', 'up-h2c', 'up-grpc', 'authz', 'otlp', 'als', 'ratelimit']);

const PORT_NAMES = [
  'up-http', 'up-h2c', 'up-grpc', 'authz', 'authz-stats', 'otlp', 'otlp-stats', 'als', 'als-stats', 'ratelimit', 'ratelimit-admin',
  'nginx', 'nginx-h2', 'nginx-tls', 'haproxy', 'haproxy-h2', 'caddy', 'hp3', 'fastify', 'relay', 'relay-tls',
  'sc-plain', 'sc-plain-admin', 'sc-workers', 'sc-workers-admin', 'sc-chain', 'sc-chain-admin', 'ingress', 'ingress-admin', 'sc-guarded', 'sc-guarded-admin',
  'sc-traced', 'sc-traced-admin', 'sc-h2', 'sc-h2-admin', 'sc-grpc', 'sc-grpc-admin',
  'sc-limited', 'sc-limited-admin', 'sc-authed', 'sc-authed-admin', 'sc-logged', 'sc-logged-admin', 'sc-als', 'sc-als-admin',
  'redis', 'rls-mem', 'rls-mem-admin', 'rls-redis', 'rls-redis-admin', 'rls-redis-b', 'rls-redis-b-admin',
  // The HTTPS section: ingresses with a TLS listener beside their plain one, one process and two workers.
  'ingress-tls', 'ingress-tls-admin', 'ingress-tls-secure', 'ingress-tls2', 'ingress-tls2-admin', 'ingress-tls2-secure',
  'ingress-10', 'ingress-10-admin', 'ingress-10k', 'ingress-10k-admin', 'ingress-10k-10', 'ingress-10k-10-admin',
  // The mesh section: caller sidecar (listen, admin, outbound), its mTLS target (listen, admin, mTLS);
  // the plaintext control's caller and target; the ingress's mesh listener and its mTLS target.
  'sc-mcall', 'sc-mcall-admin', 'sc-mcall-out', 'sc-mtarget', 'sc-mtarget-admin', 'sc-mtarget-in',
  'sc-pcall', 'sc-pcall-admin', 'sc-pcall-out', 'sc-ptarget', 'sc-ptarget-admin',
  'ingress-mesh', 'ingress-mesh-admin', 'ingress-mesh-out', 'sc-itarget', 'sc-itarget-admin', 'sc-itarget-in',
] as const;
export type PortName = (typeof PORT_NAMES)[number];
export type MeshService = 'sc-mtarget' | 'sc-itarget' | 'sc-ptarget' | 'sc-mcall' | 'sc-pcall' | 'ingress-mesh';

export class Fleet {
  private readonly started = new Map<string, Promise<Handle>>();
  readonly ports: Record<PortName, number>;
  readonly config: MainConfig;
  readonly logDir: string;
  private scaleDirs = new Map<string, string>();
  readonly mesh: MeshConfig;
  private meshCerts: ReturnType<typeof issueMeshFiles> | undefined;

  private constructor(
    readonly workDir: string,
    ports: number[],
    readonly tools: Record<string, string | undefined>,
    readonly scaleWorkloads: number,
  ) {
    this.ports = Object.fromEntries(PORT_NAMES.map((n, i) => [n, ports[i]!])) as Record<PortName, number>;
    this.logDir = path.join(workDir, 'logs');
    mkdirSync(this.logDir, { recursive: true });
    this.config = writeMainConfig(path.join(workDir, 'config'), {
      app: this.ports['up-http'],
      h2App: this.ports['up-h2c'],
      grpcApp: this.ports['up-grpc'],
      authz: this.ports.authz,
      ratelimit: this.ports.ratelimit,
      otlp: this.ports.otlp,
      als: this.ports.als,
      chainSidecar: this.ports['sc-chain'],
    });
    this.mesh = writeMeshConfig(path.join(workDir, 'config'), {
      app: this.ports['up-http'], tlsTarget: this.ports['sc-mtarget-in'], plainTarget: this.ports['sc-ptarget'], ingressTarget: this.ports['sc-itarget-in'],
    });
  }

  /**
   * A self-signed ECDSA P-256 certificate for 127.0.0.1 and localhost, made once with openssl, for
   * the rows a client reaches over TLS (wrk does not verify it).
   */
  serverCert(): { cert: string; key: string } {
    const dir = path.join(this.workDir, 'server-cert');
    const cert = path.join(dir, 'cert.pem');
    const key = path.join(dir, 'key.pem');
    if (!existsSync(cert)) {
      mkdirSync(dir, { recursive: true });
      execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '7', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'ignore' });
    }
    return { cert, key };
  }

  /** The mesh rows' certificates, issued once by a local CA in the work folder. */
  meshFiles(): ReturnType<typeof issueMeshFiles> {
    this.meshCerts ??= issueMeshFiles(path.join(this.workDir, 'mesh-pki'));
    return this.meshCerts;
  }

  static async create(workDir: string, tools: Record<string, string | undefined>, scaleWorkloads: number): Promise<Fleet> {
    return new Fleet(workDir, await freePorts(PORT_NAMES.length), tools, scaleWorkloads);
  }

  /** Start (once) and return a service; rejects with the reason it could not start. */
  get(name: string): Promise<Handle> {
    let p = this.started.get(name);
    if (!p) {
      p = this.start(name);
      // A failed start is remembered too (same reason every time), but not as unhandled.
      p.catch(() => undefined);
      this.started.set(name, p);
    }
    return p;
  }

  async stop(names: readonly string[]): Promise<void> {
    await Promise.all(
      names.map(async (name) => {
        const p = this.started.get(name);
        this.started.delete(name);
        if (!p) return;
        try {
          const h = await p;
          await Promise.all(h.procs.map((proc) => proc.stop()));
        } catch {
          /* never started */
        }
      }),
    );
  }

  /** Stop every proxy (everything but the upstreams and outside services). */
  async stopProxies(): Promise<void> {
    await this.stop([...this.started.keys()].filter((n) => !BACKENDS.has(n)));
  }

  async stopAll(): Promise<void> {
    await this.stop([...this.started.keys()]);
  }

  /** A folder of N workloads; `deployments` of them deployed (all by default); YAML or JSON. */
  scaleDir(n: number, opts: { deployments?: number; format?: 'yaml' | 'json' } = {}): string {
    const key = `${n}-${opts.deployments ?? n}-${opts.format ?? 'yaml'}`;
    let dir = this.scaleDirs.get(key);
    if (!dir) {
      dir = writeScaleConfig(path.join(this.workDir, `scale-${key}`), n, this.ports['up-http'], opts);
      this.scaleDirs.set(key, dir);
    }
    return dir;
  }

  private node(name: string, rel: string, args: (string | number)[]): Proc {
    return spawnProc(name, process.execPath, [script(rel), ...args.map(String)], { logDir: this.logDir });
  }

  private async listening(proc: Proc, port: number, timeoutMs = 15_000): Promise<void> {
    await waitUntil(() => canConnect(port), timeoutMs, `${proc.name} on port ${port}`, proc);
  }

  private async start(name: string): Promise<Handle> {
    const p = this.ports;
    const app = `127.0.0.1:${p['up-http']}`;
    type SidecarKey = 'sc-plain' | 'sc-workers' | 'sc-chain' | 'sc-guarded' | 'sc-traced' | 'sc-h2' | 'sc-grpc' | 'sc-limited' | 'sc-authed' | 'sc-logged' | 'sc-als';
    const sidecar = async (key: SidecarKey, workload: string, appAddr: string, deps: string[], gvc = GVC, logLevel?: string, records = this.config.records, extra: string[] = []): Promise<Handle> => {
      await Promise.all(deps.map((d) => this.get(d)));
      const svc = launchSvc({
        name: key, role: 'sidecar', args: [...sidecarArgs([records], workload, appAddr, gvc), ...extra],
        port: p[key], adminPort: p[`${key}-admin`], logDir: this.logDir, ...(logLevel ? { logLevel } : {}),
      });
      await waitReady(svc);
      return { name, port: p[key], procs: [svc.proc] };
    };
    switch (name) {
      case 'up-http':
      case 'up-h2c':
      case 'up-grpc': {
        const kind = name.slice(3);
        const proc = this.node(name, 'servers/upstream.js', [kind, p[name]]);
        await this.listening(proc, p[name]);
        return { name, port: p[name], procs: [proc] };
      }
      case 'authz':
      case 'otlp':
      case 'als': {
        // The auth server and the trace sink run on the gRPC server of the svcproxy build under test (APP_ROOT).
        const proc = this.node(name, 'servers/services.js', [name, p[name], p[`${name}-stats`], ...(name === 'als' ? [] : [APP_ROOT])]);
        await this.listening(proc, p[`${name}-stats`]);
        return { name, port: p[name], statsPort: p[`${name}-stats`], procs: [proc] };
      }
      case 'ratelimit': {
        const svc = launchSvc({ name, role: 'ratelimit', args: ['--config', this.config.rules], port: p.ratelimit, adminPort: p['ratelimit-admin'], logDir: this.logDir });
        await this.listening(svc.proc, p.ratelimit);
        return { name, port: p.ratelimit, procs: [svc.proc] };
      }
      case 'redis': {
        const bin = commandExists('redis-server');
        if (!bin) throw new Error('redis-server is not installed (scripts/test-deps.sh installs it)');
        const dir = path.join(this.workDir, 'redis');
        mkdirSync(dir, { recursive: true });
        // No persistence: nothing but the counters' own work.
        const proc = spawnProc(name, bin, ['--port', String(p.redis), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { logDir: this.logDir });
        await this.listening(proc, p.redis);
        return { name, port: p.redis, procs: [proc] };
      }
      case 'rls-mem':
      case 'rls-redis':
      case 'rls-redis-b': {
        // The rate-limit service section's own instances (fresh per section, so their memory is
        // reported): in-memory counters, or counters in the fleet's Redis (two instances may share it).
        const redis = name === 'rls-mem' ? [] : ['--redis', `redis://127.0.0.1:${(await this.get('redis')).port}`];
        const svc = launchSvc({ name, role: 'ratelimit', args: ['--config', this.config.rlsRules, ...redis], port: p[name], adminPort: p[`${name}-admin`], logDir: this.logDir });
        await waitReady(svc);
        return { name, port: p[name], procs: [svc.proc] };
      }
      case 'nginx':
      case 'haproxy': {
        if (!this.tools[name]) throw new Error(`${name} is not installed`);
        await this.get('up-http');
        const dir = path.join(this.workDir, name);
        mkdirSync(dir, { recursive: true });
        const ports = { listen: p[name], listenH2: p[`${name}-h2`], upstream: p['up-http'] };
        if (name === 'nginx') {
          const tls = { listen: p['nginx-tls'], ...this.serverCert() };
          const proc = startNginx(dir, { ...ports, tls }, this.logDir);
          for (const port of [ports.listen, ports.listenH2, tls.listen]) await this.listening(proc, port);
          return { name, port: ports.listen, h2Port: ports.listenH2, procs: [proc] };
        }
        const proc = startHaproxy(dir, ports, this.logDir);
        await this.listening(proc, ports.listen);
        await this.listening(proc, ports.listenH2);
        return { name, port: ports.listen, h2Port: ports.listenH2, procs: [proc] };
      }
      case 'caddy': {
        if (!this.tools.caddy) throw new Error('caddy is not installed');
        await this.get('up-http');
        const dir = path.join(this.workDir, name);
        mkdirSync(dir, { recursive: true });
        const proc = startCaddy(dir, { listen: p.caddy, upstream: p['up-http'] }, this.logDir);
        await this.listening(proc, p.caddy);
        return { name, port: p.caddy, procs: [proc] };
      }
      case 'hp3':
      case 'fastify': {
        await this.get('up-http');
        const proc = this.node(name, name === 'hp3' ? 'peers/http-proxy-3.js' : 'peers/fastify-proxy.js', [p[name], p['up-http']]);
        await this.listening(proc, p[name]);
        return { name, port: p[name], procs: [proc] };
      }
      case 'relay':
      case 'relay-tls': {
        // The floor: Node moving the bytes and nothing more (bench/peers/relay.ts).
        await this.get('up-http');
        const tlsArgs = name === 'relay-tls' ? (({ cert, key }) => [cert, key])(this.serverCert()) : [];
        const proc = this.node(name, 'peers/relay.js', [name === 'relay' ? 'tcp' : 'tls', p[name], p['up-http'], ...tlsArgs]);
        await this.listening(proc, p[name]);
        return { name, port: p[name], procs: [proc] };
      }
      case 'sc-plain':
        return sidecar('sc-plain', 'plain', app, ['up-http']);
      case 'sc-workers':
        // The same sidecar as sc-plain in cluster mode: a primary (admin, config) and two workers.
        return sidecar('sc-workers', 'plain', app, ['up-http'], GVC, undefined, this.config.records, ['--workers', '2']);
      case 'sc-chain':
        return sidecar('sc-chain', 'chain', app, ['up-http']);
      case 'sc-guarded':
        return sidecar('sc-guarded', 'guarded', app, ['up-http', 'authz', 'ratelimit']);
      case 'sc-limited':
        return sidecar('sc-limited', 'limited', app, ['up-http', 'ratelimit']);
      case 'sc-authed':
        return sidecar('sc-authed', 'authed', app, ['up-http', 'authz']);
      case 'sc-logged':
        // --log-level info: one JSON line per request on stdout, which is the process's log file.
        return sidecar('sc-logged', 'logged', app, ['up-http'], GVC, 'info');
      case 'sc-als':
        // Its own records: an access log anywhere in the configuration changes every sidecar's work.
        return sidecar('sc-als', 'als', app, ['up-http', 'als'], ALS_GVC, undefined, this.config.alsRecords);
      case 'sc-traced':
        return sidecar('sc-traced', 'traced', app, ['up-http', 'otlp'], TRACED_GVC);
      case 'sc-h2':
        return sidecar('sc-h2', 'h2', `127.0.0.1:${p['up-h2c']}`, ['up-h2c']);
      case 'sc-grpc':
        return sidecar('sc-grpc', 'grpc', `127.0.0.1:${p['up-grpc']}`, ['up-grpc']);
      case 'ingress': {
        await Promise.all([this.get('up-http'), this.get('up-grpc')]);
        const svc = launchSvc({ name, role: 'ingress', args: ingressArgs([this.config.records, this.config.deployments]), port: p.ingress, adminPort: p['ingress-admin'], logDir: this.logDir });
        await waitReady(svc);
        // Ready means listening; the deployment replicas are usable once their first probe passed.
        await waitUntil(async () => (await httpRequest(p.ingress, { host: hostOf('api') })).status === 200, 15_000, 'ingress → app answering 200', svc.proc);
        return { name, port: p.ingress, procs: [svc.proc] };
      }
      case 'ingress-tls':
      case 'ingress-tls2': {
        // The HTTP table's ingress with a TLS listener too (the bench's certificate); ingress-tls2
        // with --workers 2 (a primary and two workers sharing both listeners).
        await Promise.all([this.get('up-http'), this.get('up-grpc')]);
        const { cert, key } = this.serverCert();
        const secure = p[`${name}-secure`];
        const args = [...ingressArgs([this.config.records, this.config.deployments]), '--listen-tls', `127.0.0.1:${secure}`, '--tls-cert', cert, '--tls-key', key];
        if (name === 'ingress-tls2') args.push('--workers', '2');
        const svc = launchSvc({ name, role: 'ingress', args, port: p[name], adminPort: p[`${name}-admin`], logDir: this.logDir });
        await waitReady(svc);
        await waitUntil(async () => (await httpRequest(p[name], { host: hostOf('api') })).status === 200, 15_000, `${name} → app answering 200`, svc.proc);
        return { name, port: p[name], procs: [svc.proc] };
      }
      case 'sc-mtarget':
      case 'sc-itarget':
      case 'sc-ptarget':
      case 'sc-mcall':
      case 'sc-pcall':
      case 'ingress-mesh':
        return this.startMesh(name);
      case 'ingress-10':
      case 'ingress-10k':
      case 'ingress-10k-10': {
        // ingress-10k-10: the large route table, but only 10 deployed workloads (10 probes a second).
        await this.get('up-http');
        const n = name === 'ingress-10' ? 10 : this.scaleWorkloads;
        const deployments = name === 'ingress-10k-10' ? 10 : n;
        const svc = launchSvc({ name, role: 'ingress', args: ingressArgs([this.scaleDir(n, { deployments })]), port: p[name], adminPort: p[`${name}-admin`], logDir: this.logDir });
        await waitReady(svc, 180_000);
        await waitUntil(async () => (await httpRequest(p[name], { host: hostOf(scaleTarget(n, deployments)) })).status === 200, 180_000, `${name} answering 200`, svc.proc);
        // Measured in its steady state: after its first check of every replica. A router that just
        // started checks them all within its first 10 s (1,000 connects a second with 10,000), and
        // a run in those seconds measured that round, at about two thirds of the later throughput.
        // Asked once a second: a scrape of 10,000 workloads is itself work for the loop.
        await waitUntil(async () => replicasReady((await httpRequest(p[`${name}-admin`], { path: '/metrics', timeoutMs: 10_000 })).body) >= deployments, 60_000, `${name}: all ${deployments} replicas ready`, svc.proc, 1000);
        return { name, port: p[name], procs: [svc.proc] };
      }
      default:
        throw new Error(`unknown service ${name}`);
    }
  }

  /**
   * The mesh section's processes. Targets: sidecars of `meshed` in front of the upstream, with an
   * mTLS listener (sc-mtarget, sc-itarget) or only their plain one (sc-ptarget). Callers: a sidecar
   * of `caller` whose outbound listener (`--mesh`) wrk talks to as the caller's app would, with its
   * mesh identity (sc-mcall) or without (sc-pcall: the plaintext control, to the target's plain
   * listener); an ingress whose `--mesh` listener calls as spiffe://ORG/ingress (ingress-mesh).
   */
  /** How a mesh process is launched: role, arguments, ports, and the target it needs first (callers). */
  async meshLaunch(name: MeshService): Promise<{ role: 'sidecar' | 'ingress'; args: string[]; port: number; adminPort: number; out?: number; target?: MeshService }> {
    const p = this.ports;
    const app = `127.0.0.1:${p['up-http']}`;
    const files = name === 'sc-ptarget' || name === 'sc-pcall' ? undefined : await this.meshFiles();
    const ports = { port: p[name], adminPort: p[`${name}-admin`] };
    switch (name) {
      case 'sc-mtarget':
      case 'sc-itarget':
        return { role: 'sidecar', ...ports, args: [...sidecarArgs([this.mesh.records], MESHED, app), ...meshArgs(files!.meshed), '--mesh-inbound', `127.0.0.1:${p[`${name}-in`]}`] };
      case 'sc-ptarget':
        return { role: 'sidecar', ...ports, args: sidecarArgs([this.mesh.records], MESHED, app) };
      case 'sc-mcall':
      case 'sc-pcall':
        return {
          role: 'sidecar', ...ports, out: p[`${name}-out`], target: name === 'sc-mcall' ? 'sc-mtarget' : 'sc-ptarget',
          args: [
            ...sidecarArgs([this.mesh.records, name === 'sc-mcall' ? this.mesh.deploymentsTls : this.mesh.deploymentsPlain], CALLER, app),
            ...(files ? meshArgs(files.caller) : []), '--mesh', `127.0.0.1:${p[`${name}-out`]}`,
          ],
        };
      case 'ingress-mesh':
        return {
          role: 'ingress', ...ports, out: p['ingress-mesh-out'], target: 'sc-itarget',
          args: [...ingressArgs([this.mesh.records, this.mesh.deploymentsIngress]), ...meshArgs(files!.ingress), '--mesh', `127.0.0.1:${p['ingress-mesh-out']}`],
        };
    }
  }

  /**
   * The mesh section's processes. Targets: sidecars of `meshed` in front of the upstream, with an
   * mTLS listener (sc-mtarget, sc-itarget) or only their plain one (sc-ptarget). Callers: a sidecar
   * of `caller` whose outbound listener (`--mesh`) wrk talks to as the caller's app would, with its
   * mesh identity (sc-mcall) or without (sc-pcall: the plaintext control, to the target's plain
   * listener); an ingress whose `--mesh` listener calls as spiffe://ORG/ingress (ingress-mesh).
   */
  private async startMesh(name: MeshService): Promise<Handle> {
    await this.get('up-http');
    const { role, args, port, adminPort, out, target } = await this.meshLaunch(name);
    if (target) await this.get(target);
    const svc = launchSvc({ name, role, args, port, adminPort, logDir: this.logDir });
    await waitReady(svc);
    if (out !== undefined) {
      // The port wrk talks to: the outbound (mesh) listener, with the target's internal name as Host.
      await waitUntil(async () => (await httpRequest(out, { host: internalHost() })).status === 200, 15_000, `${name} → ${target} answering 200`, svc.proc);
      return { name, port: out, procs: [svc.proc] };
    }
    return { name, port, procs: [svc.proc] };
  }
}

/** The sum of the `svcproxy_replicas_ready` gauges in an admin `/metrics` answer. */
export function replicasReady(metrics: string): number {
  let ready = 0;
  for (const m of metrics.matchAll(/^svcproxy_replicas_ready\{[^}]*\} (\d+)$/gm)) ready += Number(m[1]);
  return ready;
}

/** The workload the scale rows send their requests to: a deployed one from the middle. */
export function scaleTarget(n: number, deployments = n): string {
  return scaleName(Math.floor(Math.min(n, deployments) / 2));
}

export async function stats(port: number): Promise<{ calls: number; bytes: number; entries?: number; streams?: number }> {
  return JSON.parse((await httpRequest(port)).body) as { calls: number; bytes: number; entries?: number; streams?: number };
}
