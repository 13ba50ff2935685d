/**
 * The retry budget (Envoy's `retry_budget`): retries in flight to a workload stay under 20% of its
 * active requests, with a floor of 3, so a failing app is not hit by a retry storm. One counter pair
 * per workload, kept by the data plane for its lifetime.
 */
export const BUDGET_PERCENT = 20;
export const BUDGET_MIN_CONCURRENCY = 3;

export class RetryBudget {
  active = 0;
  retrying = 0;

  /** May one more retry start now? */
  allows(): boolean {
    return this.retrying < Math.max(BUDGET_MIN_CONCURRENCY, Math.floor((this.active * BUDGET_PERCENT) / 100));
  }
}

export class RetryBudgets {
  private readonly byWorkload = new Map<string, RetryBudget>();

  for(workload: string): RetryBudget {
    let budget = this.byWorkload.get(workload);
    if (!budget) this.byWorkload.set(workload, (budget = new RetryBudget()));
    return budget;
  }
}
