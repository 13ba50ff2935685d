/**
 * `svcproxy up`'s local runtime, the door of `src/local/`: the supervisor that runs and restarts
 * the workload processes, readiness probing (also used for `deployment` replicas), free-port
 * allocation, the replica environment, and the built-in demo with the path of its echo app.
 * `echoScriptPath()` does not check that the script exists beyond choosing between the two places
 * it can be; a missing build shows up as the demo process failing to start (logged, retried).
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export { Supervisor, UP_SOURCE, type SupervisorOptions, type ProcessInfo } from './supervisor.js';
export { startProbing, DEFAULT_PROBE, nextProbeState, addressOfDeployment, type AddressOf, type ProbeDeps } from './probe.js';
export { allocatePort, allocatePorts, LOOPBACK } from './ports.js';
export { buildReplicaEnv, envPrefix, workloadNamespace, workloadVersion, localToken, type ReplicaEnvInput } from './env.js';
export { planReplicas, replicaCount, type ReplicaPlan } from './plan.js';
export { DEFAULT_BACKOFF, type BackoffOptions } from './process.js';
export { demoRecords, DEMO_LOCATIONS } from './demo.js';

/**
 * The compiled echo app: `echo.js` beside this module when running from `dist/`; when running
 * from the TypeScript sources (tests), `dist/local/echo.js` under the package root instead.
 */
export function echoScriptPath(): string {
  const sibling = fileURLToPath(new URL('./echo.js', import.meta.url));
  if (existsSync(sibling)) return sibling;
  return fileURLToPath(new URL('../../dist/local/echo.js', import.meta.url));
}
