/** Top costs (`profile`): CPU profiles of svcproxy processes under the HTTP table's load (bench/README.md). */
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { Fleet, type MeshService } from '../lib/fleet.js';
import { wrk, type Load } from '../lib/load.js';
import { internalHost } from '../lib/mesh.js';
import { CLK_TCK, cpuTicks, ForeignCpu, threadTicks, httpRequest, waitUntil } from '../lib/proc.js';
import { summarize, type ProfileSummary } from '../lib/profile.js';
import { fmtInt } from '../lib/report.js';
import { APP_ROOT, hostOf, ingressArgs, launchSvc, type SvcProc, sidecarArgs, waitReady } from '../lib/svc.js';
import { errText, log, opts } from '../options.js';
import { settle } from './table.js';

export interface ProfileResult {
  name: string;
  summary?: ProfileSummary;
  load?: Load;
  file?: string;
  error?: string;
  /** CPU seconds of the profiled process (all threads) and of its main thread during the measured run. */
  cpuSeconds?: number;
  mainSeconds?: number;
  foreign?: number;
}

export async function runProfiles(fleet: Fleet, keepDir: string): Promise<ProfileResult[]> {
  log('\n== CPU profiles under load');
  await fleet.stopProxies();
  const out: ProfileResult[] = [];
  const p = fleet.ports;
  interface ProfileCase { name: string; key: string; role: 'sidecar' | 'ingress'; port: number; admin: number; host: string | undefined; args: string[]; mesh?: { peer: MeshService; drive: number } }
  const cases: ProfileCase[] = [
    { name: 'svcproxy sidecar, no tags', key: 'sidecar', role: 'sidecar' as const, port: p['sc-plain'], admin: p['sc-plain-admin'], host: undefined, args: sidecarArgs([fleet.config.records], 'plain', `127.0.0.1:${p['up-http']}`) },
    { name: 'svcproxy ingress → app', key: 'ingress', role: 'ingress' as const, port: p.ingress, admin: p['ingress-admin'], host: hostOf('api'), args: ingressArgs([fleet.config.records, fleet.config.deployments]) },
    // Not asked for by the issue: the filters being built now, since that row is far slower.
    { name: 'svcproxy sidecar, ext auth (gRPC) + rate limit', key: 'sidecar-extauth-ratelimit', role: 'sidecar' as const, port: p['sc-guarded'], admin: p['sc-guarded-admin'], host: undefined, args: sidecarArgs([fleet.config.records], 'guarded', `127.0.0.1:${p['up-http']}`) },
  ];
  // The two sides of the mesh hop (caller sidecar → mTLS → target sidecar → app), each profiled with
  // the other side running unprofiled; wrk talks to the caller's outbound listener.
  for (const [key, name, profiled, peer] of [
    ['mesh-target', 'svcproxy mesh target sidecar (mTLS server side: caller → mTLS → this → app)', 'sc-mtarget', 'sc-mcall'],
    ['mesh-caller', 'svcproxy mesh caller sidecar (mTLS client side: wrk → this → mTLS → target → app)', 'sc-mcall', 'sc-mtarget'],
  ] as const) {
    const l = await fleet.meshLaunch(profiled);
    cases.push({ name, key, role: l.role, port: l.port, admin: l.adminPort, host: internalHost(), args: l.args, mesh: { peer, drive: fleet.ports['sc-mcall-out'] } });
  }
  await Promise.all([fleet.get('up-http'), fleet.get('up-grpc')]);
  await Promise.allSettled([fleet.get('authz'), fleet.get('ratelimit')]);
  for (const c of cases) {
    const dir = path.join(fleet.workDir, `profile-${c.key}`);
    mkdirSync(dir, { recursive: true });
    // A mesh target starts before its caller; the process measured is always the profiled one.
    const peerLaunch = c.mesh ? await fleet.meshLaunch(c.mesh.peer) : undefined;
    const startPeer = (): SvcProc | undefined => peerLaunch && launchSvc({ name: `profile-${c.key}-peer`, role: peerLaunch.role, args: peerLaunch.args, port: peerLaunch.port, adminPort: peerLaunch.adminPort, logDir: fleet.logDir });
    const peerFirst = peerLaunch?.target === undefined ? startPeer() : undefined;
    const svc = launchSvc({ name: `profile-${c.key}`, role: c.role, args: c.args, port: c.port, adminPort: c.admin, logDir: fleet.logDir, nodeFlags: ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--cpu-prof-interval=500'] });
    const peerSvc = peerFirst ?? startPeer();
    const drivePort = c.mesh?.drive ?? c.port;
    const res: ProfileResult = { name: c.name };
    out.push(res);
    try {
      if (peerSvc) await waitReady(peerSvc);
      await waitReady(svc);
      await waitUntil(async () => (await httpRequest(drivePort, c.host ? { host: c.host } : {})).status === 200, 15_000, 'answering 200', svc.proc);
      const w = { url: `http://127.0.0.1:${drivePort}/`, connections: opts.connections, ...(c.host ? { host: c.host } : {}) };
      await settle();
      await wrk({ ...w, seconds: opts.warmup });
      const fromUs = Number(process.hrtime.bigint() / 1000n);
      const cpu0 = cpuTicks([svc.proc.pid]);
      const main0 = threadTicks(svc.proc.pid);
      const foreign = new ForeignCpu();
      res.load = await wrk({ ...w, seconds: opts.duration });
      res.foreign = foreign.read();
      res.cpuSeconds = (cpuTicks([svc.proc.pid]) - cpu0) / CLK_TCK;
      res.mainSeconds = (threadTicks(svc.proc.pid) - main0) / CLK_TCK;
      const toUs = Number(process.hrtime.bigint() / 1000n);
      await svc.proc.stop(30_000);
      const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
      if (!file) throw new Error(`no .cpuprofile written (exit ${String(await svc.proc.exited)})`);
      const kept = path.join(keepDir, `${c.key}.cpuprofile`);
      copyFileSync(path.join(dir, file), kept);
      res.file = kept;
      res.summary = summarize(kept, APP_ROOT, 25, { fromUs, toUs });
      log(`  ${c.name}: ${fmtInt(res.load.rps)} req/s while profiled; top: ${res.summary.self.slice(0, 5).map((l) => `${l.name} ${(l.share * 100).toFixed(1)}%`).join(', ')}`);
    } catch (err) {
      res.error = errText(err);
      log(`  ${c.name}: ${res.error}`);
    } finally {
      await svc.proc.stop();
      await peerSvc?.proc.stop();
    }
  }
  return out;
}
