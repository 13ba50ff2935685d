/**
 * The health rule of a workload in one location (src/local/health.ts), as a table: each row is a set
 * of replica facts and the value the rule must give; plus the loading deadline from the probe.
 */
import t from 'tap';
import { HEALTH_VALUES, loadingDeadlineMs, MAX_LOADING_RESTARTS, MIN_LOADING_DEADLINE_MS, workloadHealth, type Health, type HealthInput, type ReplicaFacts } from '../../src/local/health.js';
import { probe } from './fixtures.js';

const NOW = 1_000_000;
const DEADLINE = 30_000;

/** A replica `up` started `ago` ms before NOW, not ready, never ready, no restarts. */
function started(over: Partial<ReplicaFacts> = {}, ago = 1000): ReplicaFacts {
  return { ready: false, stopping: false, wasReady: false, restarts: 0, startedAtMs: NOW - ago, checked: true, ...over };
}

/** A `deployment` replica (not run by svcproxy). */
function external(over: Partial<ReplicaFacts> = {}): ReplicaFacts {
  return { ready: false, stopping: false, wasReady: false, restarts: 0, checked: true, ...over };
}

function input(replicas: ReplicaFacts[], over: Partial<HealthInput> = {}): HealthInput {
  return { configured: true, suspended: false, wanted: replicas.length, replicas, nowMs: NOW, loadingDeadlineMs: DEADLINE, ...over };
}

const cases: [string, HealthInput, Health][] = [
  ['one starting replica, not ready yet', input([started()]), 'Loading'],
  ['two starting, none ready', input([started(), started({}, 50)]), 'Loading'],
  ['wanted but not launched yet', input([], { wanted: 1 }), 'Loading'],
  ['replacing: the old one stopping, the new one not launched', input([started({ stopping: true })], { wanted: 1 }), 'Loading'],
  ['replacing: the old one stopping, the new one starting', input([started({ stopping: true, wasReady: true }), started()], { wanted: 1 }), 'Loading'],
  ['one ready', input([started({ ready: true, wasReady: true })]), 'Healthy'],
  ['one of three ready', input([started({ ready: true, wasReady: true }), started(), started({ restarts: 5 })]), 'Healthy'],
  ['ready while restarting others', input([started({ ready: true, wasReady: true, restarts: 9 })]), 'Healthy'],
  ['scaled to zero', input([], { wanted: 0 }), 'Healthy'],
  ['scaling to zero: the last one stopping', input([started({ stopping: true, wasReady: true })], { wanted: 0 }), 'Healthy'],
  ['was ready, now none is (probe fails or crashed)', input([started({ wasReady: true })]), 'Unhealthy'],
  [`crashed ${MAX_LOADING_RESTARTS} times, never ready`, input([started({ restarts: MAX_LOADING_RESTARTS })]), 'Unhealthy'],
  [`crashed ${MAX_LOADING_RESTARTS - 1} times: still loading`, input([started({ restarts: MAX_LOADING_RESTARTS - 1 })]), 'Loading'],
  ['not ready at the deadline', input([started({}, DEADLINE)]), 'Unhealthy'],
  ['not ready just before the deadline', input([started({}, DEADLINE - 1)]), 'Loading'],
  ['the oldest starting replica decides the deadline', input([started({}, 10), started({}, DEADLINE + 5)]), 'Unhealthy'],
  ['removed from the configuration, replicas stopping', input([started({ stopping: true, wasReady: true })], { configured: false, wanted: 0 }), 'Deleting'],
  ['suspended, replicas stopping', input([started({ stopping: true, wasReady: true })], { suspended: true, wanted: 0 }), 'Deleting'],
  ['suspended, a ready replica not yet stopped', input([started({ ready: true, wasReady: true })], { suspended: true, wanted: 0 }), 'Deleting'],
  ['suspended, nothing running', input([], { suspended: true, wanted: 0 }), 'Unknown'],
  ['deployment replicas not probed yet', input([external({ checked: false }), external({ checked: false })], { wanted: undefined }), 'Unknown'],
  ['deployment replica ready', input([external({ ready: true, wasReady: true })], { wanted: undefined }), 'Healthy'],
  ['deployment replica checked, not ready', input([external()], { wanted: undefined }), 'Unhealthy'],
  ['deployment: one checked not ready, one not probed', input([external({ checked: false }), external()], { wanted: undefined }), 'Unhealthy'],
  ['no replicas and nothing starts them', input([], { wanted: undefined }), 'Unknown'],
];

t.test('health rule table', async (t) => {
  for (const [name, given, want] of cases) t.equal(workloadHealth(given), want, name);
  // Every value of the spec is reachable by the rule.
  t.same(new Set(cases.map((c) => c[2])), new Set(HEALTH_VALUES), 'each of the five values appears');
});

t.test('loading deadline: the probe\'s failure budget, at least the minimum', async (t) => {
  t.equal(loadingDeadlineMs(undefined), MIN_LOADING_DEADLINE_MS);
  t.equal(loadingDeadlineMs(probe({ initialDelaySeconds: 0, periodSeconds: 10, failureThreshold: 3 })), MIN_LOADING_DEADLINE_MS);
  t.equal(loadingDeadlineMs(probe({ initialDelaySeconds: 60, periodSeconds: 10, failureThreshold: 3 })), 90_000);
  t.equal(loadingDeadlineMs(probe({ initialDelaySeconds: 0, periodSeconds: 20, failureThreshold: 5 })), 100_000);
});
