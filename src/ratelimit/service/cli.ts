/**
 * `svcproxy ratelimit --config RULES.yaml [--redis URL] [--listen HOST:PORT] [--admin HOST:PORT]
 * [--status HOST:PORT] [--metrics HOST:PORT] [--tls-cert F --tls-key F]`: runs the rate-limit service until SIGINT/SIGTERM (exit 0); SIGHUP
 * reloads the rules. Exit 2 on a usage error, 1 on invalid rules (every error on stderr as
 * `FILE: PATH: what is wrong`), an unreachable Redis (its URL, password hidden, and the reason) or a
 * listener that cannot bind.
 */
import { waitForSignals } from '../../signals.js';
import type { Logger } from 'pino';
import type { Flags } from '../../flags.js';
import { formatHostPort, parseHostPort } from '../../address.js';
import { RateLimitApp, RulesError } from './app.js';
import { adminAddresses, type AdminAddresses } from '../../admin/server.js';
import { announceStart, logAdminListeners } from '../../summary.js';
import { rateLimitSummary } from './summary.js';
import { startupDone } from '../../v8-flags.js';

export const DEFAULT_LISTEN = '127.0.0.1:8081';

function usage(message: string): number {
  process.stderr.write(`svcproxy ratelimit: ${message}\n  usage: svcproxy ratelimit --config RULES.yaml [--redis URL] [--listen HOST:PORT] [--admin HOST:PORT] [--status HOST:PORT] [--metrics HOST:PORT]\n`);
  return 2;
}

export async function runRateLimitService(flags: Flags, logger: Logger): Promise<number> {
  if (!flags.config || flags.config.length === 0) return usage('--config RULES.yaml (a rules file or a folder of them) is required');
  if (Boolean(flags['tls-cert']) !== Boolean(flags['tls-key'])) return usage('--tls-cert and --tls-key go together');
  let listen: { host: string; port: number };
  let addresses: AdminAddresses;
  try {
    listen = parseHostPort(flags.listen?.[0] ?? DEFAULT_LISTEN);
    addresses = adminAddresses(flags);
  } catch (err) {
    return usage((err as Error).message);
  }
  let app: RateLimitApp;
  try {
    app = await RateLimitApp.start({
      rules: flags.config,
      ...(flags.redis ? { redis: flags.redis } : {}),
      listen,
      ...addresses,
      ...(flags['tls-cert'] && flags['tls-key'] ? { tls: { certFile: flags['tls-cert'], keyFile: flags['tls-key'] } } : {}),
      logger,
    });
  } catch (err) {
    if (err instanceof RulesError) {
      for (const line of err.errors) process.stderr.write(`${line}\n`);
      process.stderr.write(`svcproxy ratelimit: ${err.message}\n`);
    } else {
      process.stderr.write(`svcproxy ratelimit: ${(err as Error).message}\n`);
    }
    return 1;
  }
  logger.info({ address: formatHostPort(app.address), store: app.store.kind, tls: Boolean(flags['tls-cert']) }, 'ratelimit listening');
  logAdminListeners(logger, { admin: app.admin, status: app.statusListener, metrics: app.metricsListener });
  announceStart(rateLimitSummary(app, flags.config, flags.redis, Boolean(flags['tls-cert'])), logger);
  startupDone();
  const signal = await waitForSignals(() => void app.reload());
  logger.info({ signal }, 'stopping');
  await app.close();
  logger.info('stopped');
  return 0;
}
