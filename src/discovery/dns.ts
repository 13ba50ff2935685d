/**
 * Replicas found by DNS (DESIGN §8b; Envoy's STRICT_DNS, nginx's `resolve`): every name a
 * `deployment` record gives as a replica's address is looked up (A and AAAA), and asked again when
 * its answer's TTL runs out (at least 1 s, at most 5 min). The addresses of the last answer, sorted
 * (IPv4 before IPv6, numerically), are the replicas. A failed lookup (a timeout, SERVFAIL, no server)
 * keeps the last answer and is retried sooner (1 s, doubling to 30 s); an answer that the name has
 * no address (NXDOMAIN, NODATA) is an answer: no replicas.
 *
 * `--dns-server HOST:PORT` names the servers to ask. Without it the system's servers are asked,
 * and a name they cannot answer is then looked up as any program would (`getaddrinfo`: the hosts
 * file and resolv.conf's search domains, so Kubernetes' short names such as `api.shop` work), with
 * no TTL to follow: asked again every 5 s.
 */
import { EventEmitter } from 'node:events';
import { lookup as osLookup, Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { Logger } from 'pino';
import type { Clock, Timer } from '../deps.js';
import { parseAddress } from '../firewall/cidr.js';

export const MIN_TTL_S = 1;
export const MAX_TTL_S = 300;
/** Re-lookup period of answers that carry no TTL (getaddrinfo) and of answers with no address. */
export const NO_TTL_S = 5;
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 30_000;

export interface DnsAnswer {
  /** Addresses as answered (any order, duplicates allowed). */
  readonly addresses: readonly string[];
  /** Seconds until the answer should be asked again (the smallest record TTL). */
  readonly ttlSeconds: number;
}

/** Looks a name up; throws when the lookup failed (the last answer is then kept). */
export type DnsLookup = (name: string) => Promise<DnsAnswer>;

/** DNS codes that mean "the name has no such address" (an answer), not "no answer". */
const NO_ADDRESS = new Set(['ENODATA', 'ENOTFOUND', 'NODATA', 'NOTFOUND']);

function noAddress(err: unknown): boolean {
  return NO_ADDRESS.has((err as NodeJS.ErrnoException).code ?? '');
}

/** `HOST:PORT` or `[V6]:PORT` or a bare address, as Node's `Resolver.setServers` takes it; throws on anything else. */
export function checkDnsServer(server: string): string {
  if (isIP(server.trim()) === 6) return `[${server.trim()}]:53`;
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/.exec(server.trim());
  const host = m?.[1] ?? m?.[2];
  const port = m?.[3] === undefined ? 53 : Number(m[3]);
  if (!m || host === undefined || isIP(host) === 0 || (m[1] !== undefined && isIP(host) !== 6) || port < 1 || port > 65535) {
    throw new Error(`--dns-server ${JSON.stringify(server)} must be an IP address with an optional port (127.0.0.1:53, [::1]:53)`);
  }
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The lookup the runtime uses: `servers` given, only those are asked; otherwise as the module says. */
export function dnsLookup(servers?: readonly string[]): DnsLookup {
  const resolver = new Resolver({ timeout: 2000, tries: 2 });
  const own = servers !== undefined && servers.length > 0;
  if (own) resolver.setServers(servers.map(checkDnsServer));
  return async (name) => {
    try {
      return await resolveBoth(resolver, name);
    } catch (err) {
      if (own) {
        if (noAddress(err)) return { addresses: [], ttlSeconds: NO_TTL_S };
        throw err;
      }
      // The system's servers do not know it (or cannot be reached): look it up as programs do.
      try {
        const found = await osLookup(name, { all: true });
        return { addresses: found.map((a) => a.address), ttlSeconds: NO_TTL_S };
      } catch (fallback) {
        if (noAddress(fallback)) return { addresses: [], ttlSeconds: NO_TTL_S };
        throw err;
      }
    }
  };
}

/** A and AAAA at once: both must answer (an address list or "none"); either failing fails the lookup. */
async function resolveBoth(resolver: Resolver, name: string): Promise<DnsAnswer> {
  const [v4, v6] = await Promise.allSettled([resolver.resolve4(name, { ttl: true }), resolver.resolve6(name, { ttl: true })]);
  const addresses: string[] = [];
  let ttl = Infinity;
  let none = 0;
  for (const result of [v4, v6]) {
    if (result.status === 'rejected') {
      if (!noAddress(result.reason)) throw result.reason;
      none++;
      continue;
    }
    for (const record of result.value) {
      addresses.push(record.address);
      ttl = Math.min(ttl, record.ttl);
    }
  }
  // Neither family has an address: "no such name", which the caller may still ask getaddrinfo about.
  if (none === 2) throw Object.assign(new Error(`${name}: no A or AAAA record`), { code: 'ENOTFOUND' });
  return { addresses, ttlSeconds: Number.isFinite(ttl) ? ttl : NO_TTL_S };
}

/** Sorted and deduplicated: IPv4 (and IPv4-mapped) before IPv6, each numerically. */
export function sortAddresses(addresses: readonly string[]): string[] {
  const keyed = new Map<string, number[]>();
  for (const a of addresses) {
    const parsed = parseAddress(a);
    if (!parsed || keyed.has(a)) continue;
    keyed.set(a, parsed.family === 4 ? [4, parsed.v4] : [6, ...parsed.v6]);
  }
  return [...keyed.entries()]
    .sort(([, x], [, y]) => {
      for (let i = 0; i < Math.max(x.length, y.length); i++) {
        const d = (x[i] ?? -1) - (y[i] ?? -1);
        if (d !== 0) return d;
      }
      return 0;
    })
    .map(([a]) => a);
}

export function clampTtl(seconds: number): number {
  return Math.min(MAX_TTL_S, Math.max(MIN_TTL_S, Number.isFinite(seconds) ? seconds : MIN_TTL_S));
}

interface Tracked {
  /** Sorted addresses of the last answer; undefined until the first answer. */
  addresses: readonly string[] | undefined;
  timer: Timer | undefined;
  retryMs: number;
  /** Resolves once the first lookup (answer or failure) is done. */
  readonly first: Promise<void>;
  settle: () => void;
  closed: boolean;
}

export type DnsOutcome = 'answer' | 'empty' | 'failure';

export interface DnsDiscoveryOptions {
  readonly lookup: DnsLookup;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Each lookup's outcome, for the metrics. */
  readonly observe?: (name: string, outcome: DnsOutcome, addresses: number) => void;
}

/**
 * The names being followed and their last answers. Emits `change` (name) when a name's address set
 * changes; the runtime then rebuilds the deployment replicas from the answers it holds.
 */
export class DnsDiscovery extends EventEmitter {
  private readonly names = new Map<string, Tracked>();

  constructor(private readonly opts: DnsDiscoveryOptions) {
    super();
  }

  /** Follows exactly these names from now on: new ones are looked up, dropped ones forgotten. */
  track(names: Iterable<string>): void {
    const wanted = new Set(names);
    for (const [name, t] of this.names) {
      if (wanted.has(name)) continue;
      t.closed = true;
      this.opts.clock.clearTimeout(t.timer);
      t.settle();
      this.names.delete(name);
    }
    for (const name of wanted) {
      if (this.names.has(name)) continue;
      let settle!: () => void;
      const first = new Promise<void>((resolve) => (settle = resolve));
      const t: Tracked = { addresses: undefined, timer: undefined, retryMs: RETRY_FIRST_MS, first, settle, closed: false };
      this.names.set(name, t);
      void this.ask(name, t);
    }
  }

  /** The last answer's addresses, sorted; undefined before the first answer. */
  addresses(name: string): readonly string[] | undefined {
    return this.names.get(name)?.addresses;
  }

  /** Resolves when every name followed now has had its first lookup (answered or failed). */
  async firstLookups(): Promise<void> {
    await Promise.all([...this.names.values()].map((t) => t.first));
  }

  close(): void {
    this.track([]);
  }

  private async ask(name: string, t: Tracked): Promise<void> {
    const { clock, logger, observe } = this.opts;
    let delayMs: number;
    try {
      const answer = await this.opts.lookup(name);
      if (t.closed) return;
      const addresses = sortAddresses(answer.addresses);
      const ttl = clampTtl(answer.addresses.length === 0 ? NO_TTL_S : answer.ttlSeconds);
      observe?.(name, addresses.length === 0 ? 'empty' : 'answer', addresses.length);
      t.retryMs = RETRY_FIRST_MS;
      delayMs = ttl * 1000;
      const before = t.addresses;
      t.addresses = addresses;
      if (before === undefined || before.length !== addresses.length || before.some((a, i) => a !== addresses[i])) {
        const log = addresses.length === 0 ? logger.warn.bind(logger) : logger.info.bind(logger);
        log({ name, addresses, ttl, ...(before ? { before } : {}) }, addresses.length === 0 ? 'dns: the name has no address; its replicas are drained' : 'dns answer');
        this.emit('change', name);
      }
    } catch (err) {
      if (t.closed) return;
      observe?.(name, 'failure', t.addresses?.length ?? 0);
      delayMs = t.retryMs;
      t.retryMs = Math.min(RETRY_MAX_MS, t.retryMs * 2);
      logger.warn({ name, err: (err as Error).message, kept: t.addresses ?? [], retryInMs: delayMs }, 'dns lookup failed; keeping the last answer');
    }
    t.settle();
    t.timer = clock.setTimeout(() => void this.ask(name, t), delayMs);
    t.timer.unref?.();
  }
}
