/**
 * Metrics a component registers once per registry: components are built again on every reload (and
 * once per workload), so each looks its metric up by name and creates it only the first time
 * (the request path's histograms and counters: fast-metrics.ts, through `registered` too).
 */
import { Counter, type Registry } from 'prom-client';

export function registered<T>(registry: Registry, name: string, create: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? create();
}

export function sharedCounter<L extends string = string>(registry: Registry, name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
  return registered(registry, name, () => new Counter<L>({ name, help, labelNames, registers: [registry] }));
}
