/**
 * Rate limiting (DESIGN §7): the sidecar filter that asks an Envoy-compatible rate-limit service
 * (`rateLimitFactory`, its policy type `RateLimitConfig`), and svcproxy's own such service
 * (`runRateLimitService`, the `svcproxy ratelimit` command; `service/app.ts` to embed it). The service
 * and its Redis client load only when the command runs, so proxy roles never pay for them.
 */
import type { Logger } from 'pino';
import type { Flags } from '../flags.js';

export { rateLimitFactory, rateLimitConfig, type RateLimitConfig, type RateLimitFactoryOptions } from './filter.js';

export async function runRateLimitService(flags: Flags, logger: Logger): Promise<number> {
  const { runRateLimitService: run } = await import('./service/cli.js');
  return run(flags, logger);
}
