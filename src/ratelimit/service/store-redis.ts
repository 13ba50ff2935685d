/**
 * The Redis counter store (`--redis URL`): counters shared by any number of service instances. One
 * Lua script runs per check, so a request's counters are read and updated atomically even when many
 * instances count the same descriptor (fixed window: INCRBY + EXPIRE on the window's key; sliding
 * window: trim, count, and log only an allowed hit, in a sorted set). Time is the instance's injected
 * clock, passed to the script, so instances should keep their clocks in sync (NTP) as the reference
 * server's instances must. Keys start with `svcproxy:rl:`; a single Redis (not Cluster) is expected.
 *
 * Failure: the connection never queues commands while down (`enableOfflineQueue: false`) and every
 * command has a timeout, so a check fails fast with `StoreError` instead of waiting; the client
 * reconnects in the background (every ≤ 1 s) and checks work again as soon as Redis is back.
 * `connectRedisStore` rejects with the URL (password hidden) and the reason when Redis cannot be
 * reached at start.
 */
import { randomBytes } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import {
  fixedKey, fixedReset, slidingKey, slidingReset, StoreError,
  type CounterCheck, type CounterResult, type Store,
} from './store.js';

/**
 * KEYS: one counter key per check. ARGV: now (ms), hits, a unique id for this call, then per check
 * the algorithm (`f` or `s`), the limit and the window in seconds. Returns per check {over, remaining,
 * oldest logged time or -1}.
 */
export const CHECK_SCRIPT = `
local now = tonumber(ARGV[1])
local hits = tonumber(ARGV[2])
local uid = ARGV[3]
local out = {}
for i, key in ipairs(KEYS) do
  local base = 3 + (i - 1) * 3
  local algorithm = ARGV[base + 1]
  local limit = tonumber(ARGV[base + 2])
  local window = tonumber(ARGV[base + 3])
  if algorithm == 'f' then
    local count = redis.call('INCRBY', key, hits)
    if count == hits then redis.call('EXPIRE', key, window) end
    if count > limit then
      out[i] = {1, 0, -1}
    else
      out[i] = {0, limit - count, -1}
    end
  else
    local windowMs = window * 1000
    redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. (now - windowMs))
    local count = redis.call('ZCARD', key)
    local over = 1
    if count + hits <= limit then
      over = 0
      for j = 1, hits do redis.call('ZADD', key, now, uid .. ':' .. j) end
      count = count + hits
      redis.call('PEXPIRE', key, windowMs + 1000)
    end
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    local oldestAt = -1
    if oldest[2] then oldestAt = tonumber(oldest[2]) end
    if over == 1 then
      out[i] = {1, 0, oldestAt}
    else
      out[i] = {0, limit - count, oldestAt}
    end
  end
end
return out
`;

export const KEY_PREFIX = 'svcproxy:rl:';

type CheckCommand = (numKeys: number, ...args: (string | number)[]) => Promise<[number, number, number][]>;

export interface RedisStoreOptions {
  readonly logger: Logger;
  /** Bound on one check's round trip; past it the check fails (default 500 ms). */
  readonly commandTimeoutMs?: number;
  /** Bound on the first connection (default 3000 ms). */
  readonly connectTimeoutMs?: number;
  /** Counted on every failed check. */
  readonly onError?: (err: Error) => void;
}

/** The URL with its password replaced, for messages. */
export function redactRedisUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}

export class RedisStore implements Store {
  readonly kind = 'redis';
  private readonly uid = randomBytes(6).toString('hex');
  private seq = 0;

  private constructor(private readonly redis: Redis, private readonly opts: RedisStoreOptions) {}

  ready(): boolean {
    return this.redis.status === 'ready';
  }

  async check(checks: readonly CounterCheck[], hits: number, nowMs: number): Promise<CounterResult[]> {
    if (checks.length === 0) return [];
    const keys: string[] = [];
    const args: (string | number)[] = [Math.floor(nowMs), hits, `${this.uid}:${++this.seq}`];
    for (const c of checks) {
      keys.push(KEY_PREFIX + (c.algorithm === 'sliding-window' ? slidingKey(c) : fixedKey(c, nowMs)));
      args.push(c.algorithm === 'sliding-window' ? 's' : 'f', c.limit, c.windowSeconds);
    }
    let rows: [number, number, number][];
    try {
      rows = await (this.redis as unknown as { svcproxyRateLimit: CheckCommand }).svcproxyRateLimit(keys.length, ...keys, ...args);
    } catch (err) {
      this.opts.onError?.(err as Error);
      throw new StoreError(`redis: ${(err as Error).message}`, err);
    }
    return checks.map((c, i) => {
      const [over, remaining, oldest] = rows[i] ?? [1, 0, -1];
      return {
        over: over === 1,
        remaining,
        resetSeconds: c.algorithm === 'sliding-window'
          ? slidingReset(oldest >= 0 ? oldest : undefined, nowMs, c.windowSeconds)
          : fixedReset(nowMs, c.windowSeconds),
      };
    });
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }

  /** Connect, or reject with the (redacted) URL and the reason. */
  static async connect(url: string, opts: RedisStoreOptions): Promise<RedisStore> {
    const logger = opts.logger;
    const shown = redactRedisUrl(url);
    const options: RedisOptions = {
      lazyConnect: true,
      // Fail fast while disconnected instead of queueing checks that would outlive the client's deadline.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: opts.commandTimeoutMs ?? 500,
      connectTimeout: opts.connectTimeoutMs ?? 3000,
      retryStrategy: (times) => Math.min(100 * times, 1000),
      reconnectOnError: () => false,
      // Checks arriving in one event-loop turn go out as one write (one pipeline) instead of a
      // write each: the socket write was a quarter of the service's time under load.
      enableAutoPipelining: true,
    };
    let redis: Redis;
    try {
      redis = new Redis(url, options);
    } catch (err) {
      throw new Error(`cannot use Redis URL ${shown}: ${(err as Error).message}`);
    }
    redis.defineCommand('svcproxyRateLimit', { lua: CHECK_SCRIPT });
    let lastError = '';
    redis.on('error', (err: Error) => {
      // ioredis repeats the same error on every reconnect attempt: log changes only.
      if (err.message !== lastError) logger.warn({ err: err.message, redis: shown }, 'redis error');
      lastError = err.message;
    });
    redis.on('ready', () => {
      if (lastError) logger.info({ redis: shown }, 'redis connection back');
      lastError = '';
    });
    try {
      await redis.connect();
      await redis.ping();
    } catch (err) {
      redis.disconnect();
      // ioredis rejects with "Connection is closed."; the `error` event before it says why.
      const reason = lastError || (err as Error).message || String(err);
      throw new Error(`cannot reach Redis at ${shown}: ${reason}`);
    }
    return new RedisStore(redis, opts);
  }
}
