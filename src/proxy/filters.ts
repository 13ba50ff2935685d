/**
 * The filter contract (STYLE §2): a filter looks at the exchange and either lets it continue
 * (`undefined`) or answers it (a `LocalReply`); the chain stops at the first answer. Chains are built
 * once per workload for every configuration snapshot from the workload's policy, so a workload without
 * tags has an empty chain and pays nothing. Ingress filters (the external firewall) run before replica
 * choice; sidecar filters (external authorization, rate limiting) run in front of the app.
 */
import type { GvcModel, Snapshot, WorkloadModel } from '../config/model.js';
import type { Deps } from '../deps.js';
import type { Metrics } from '../admin/metrics.js';
import type { LocalReply } from './errors.js';
import type { Exchange } from './exchange.js';

export type FilterResult = LocalReply | undefined;

export interface Filter {
  readonly name: string;
  run(exchange: Exchange): FilterResult | Promise<FilterResult>;
}

export interface FilterContext {
  readonly snapshot: Snapshot;
  readonly workload: WorkloadModel;
  readonly gvc: GvcModel | undefined;
  readonly deps: Deps;
  readonly metrics: Metrics;
  /** Clients that outlive one snapshot (gRPC channels to an auth or rate-limit service). */
  readonly shared: SharedResources;
}

/**
 * Long-lived objects keyed by what they connect to, created on first use and kept across reloads
 * for the data plane's lifetime; `close()` on each when the data plane closes.
 */
export class SharedResources {
  private readonly items = new Map<string, { close?(): unknown }>();

  get<T extends { close?(): unknown }>(key: string, create: () => T): T {
    let item = this.items.get(key) as T | undefined;
    if (!item) {
      item = create();
      this.items.set(key, item);
    }
    return item;
  }

  async close(): Promise<void> {
    const items = [...this.items.values()];
    this.items.clear();
    await Promise.all(items.map(async (item) => item.close?.()));
  }
}

/** Builds a workload's filter, or `undefined` when the workload's policy does not use it. */
export type FilterFactory = (ctx: FilterContext) => Filter | undefined;

export type Chain = readonly Filter[];

export const EMPTY_CHAIN: Chain = Object.freeze([]);

export function buildChain(factories: readonly FilterFactory[], ctx: FilterContext): Chain {
  const chain: Filter[] = [];
  for (const factory of factories) {
    const filter = factory(ctx);
    if (filter) chain.push(filter);
  }
  return chain.length === 0 ? EMPTY_CHAIN : Object.freeze(chain);
}

/**
 * Run a chain. Synchronous filters stay synchronous; the first promise switches to async. `done` gets
 * the first answer, or `undefined` when every filter let the exchange continue.
 */
export function runChain(chain: Chain, exchange: Exchange, done: (result: FilterResult) => void, from = 0): void {
  for (let i = from; i < chain.length; i++) {
    let result: FilterResult | Promise<FilterResult>;
    try {
      result = chain[i]!.run(exchange);
    } catch (err) {
      exchange.errorCode = 'FILTER_ERROR';
      done({ code: 'BAD_REQUEST', status: 500, message: `filter ${chain[i]!.name} failed: ${(err as Error).message}` });
      return;
    }
    if (result instanceof Promise) {
      result.then(
        (r) => (r ? done(r) : runChain(chain, exchange, done, i + 1)),
        (err: Error) => done({ code: 'BAD_REQUEST', status: 500, message: `filter ${chain[i]!.name} failed: ${err.message}` }),
      );
      return;
    }
    if (result) {
      done(result);
      return;
    }
  }
  done(undefined);
}
