/**
 * The filter chain, the proxy's side of the filter contract (../filter/contract.ts): chains are built
 * once per workload for every configuration snapshot from the workload's policy, so a workload without
 * tags has an empty chain and pays nothing, and run per request, stopping at the first answer. Ingress
 * filters (the external firewall) run before replica choice; sidecar filters (external authorization,
 * rate limiting) run in front of the app.
 */
import type { Filter, FilterContext, FilterFactory, FilterResult } from '../filter/index.js';
import type { Exchange } from './exchange.js';

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
  // A request that asked for debug answers times each filter (Server-Timing); others pay this check.
  const debug = exchange.debugInfo;
  for (let i = from; i < chain.length; i++) {
    let result: FilterResult | Promise<FilterResult>;
    const startedAt = debug === undefined ? 0 : performance.now();
    const ran = debug === undefined ? undefined : (): void => debug.filterRan(chain[i]!.name, performance.now() - startedAt);
    try {
      result = chain[i]!.run(exchange);
    } catch (err) {
      exchange.errorCode = 'FILTER_ERROR';
      done({ code: 'BAD_REQUEST', status: 500, message: `filter ${chain[i]!.name} failed: ${(err as Error).message}` });
      return;
    }
    if (result instanceof Promise) {
      result.then(
        (r) => {
          ran?.();
          if (r) done(r);
          else runChain(chain, exchange, done, i + 1);
        },
        (err: Error) => {
          ran?.();
          done({ code: 'BAD_REQUEST', status: 500, message: `filter ${chain[i]!.name} failed: ${err.message}` });
        },
      );
      return;
    }
    ran?.();
    if (result) {
      done(result);
      return;
    }
  }
  done(undefined);
}
