/**
 * `up`'s platform API (DESIGN §12–§13): the platform's resources served from `up`'s own records
 * (the table of kinds, kinds.ts), read and written by the platform's CLI with the operator key, and
 * by workload code with its token; writes go through the config store as a reload does. Two ways in. Each replica's outbound
 * (mesh) listener answers requests for `api.<internal domain>` (`SVC_ENDPOINT`; no workload host
 * can have one label under the internal domain) here, in-process, as that replica's workload:
 * `wrap()` puts the API in front of the data plane's handlers of that listener, so the caller is
 * known from the listener that took the connection, and nothing a client sends can claim another.
 * Requests inside a CONNECT to that name (proxy clients that always tunnel, as undici's
 * EnvHttpProxyAgent) are served the same way. The `--api` listener (default 127.0.0.1:15080) serves
 * the same API to callers outside every workload (a shell, `cpln`, a laptop's curl): the operator
 * key acts there, a workload token is refused (403), no credential reads what the spec allows (auth.ts). `listen()` fails when
 * the address is taken; requests never throw.
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { ConfigStore } from '../../config/store.js';
import { listen, type Listener, type ListenerHandlers, type ListenerLimits } from '../../listener/index.js';
import { routingAuthority } from '../../proxy/path.js';
import { CONNECTION_ESTABLISHED } from '../../proxy/tunnel.js';
import { parseHostPort } from '../../address.js';
import { handleApi, type ApiDeps, type ApiRequest, type ApiResponse } from './handler.js';
import type { ApiCaller } from './auth.js';
import { BODY_TIMEOUT_MS, MAX_BODY_BYTES } from './body.js';
import type { DeploymentStatus } from '../deployments.js';
import type { ReplicaProcess } from './context.js';
import { systemClock, type Clock } from '../../deps.js';

export type { ApiCaller } from './auth.js';
export { API_ERRORS, type ApiErrorBody, type ApiErrorCode } from './errors.js';
export { QUOTA_DEFAULTS } from './quota.js';
export { openOperatorKey, OPERATOR_ACCOUNT } from './operator-key.js';

export const DEFAULT_API_ADDRESS = '127.0.0.1:15080';

export interface PlatformApiOptions {
  readonly store: ConfigStore;
  org(): string;
  readonly tokenSecret: string | Uint8Array;
  /** The operator key (operator-key.ts), accepted as an org administrator. */
  readonly operatorKey?: string;
  readonly logger: Logger;
  /** Wall clock (ms since the epoch); default `Date.now`. */
  readonly now?: () => number;
  /** A workload's deployments (src/local/deployments.ts); default: none. */
  readonly deployments?: (key: string) => readonly DeploymentStatus[];
  /** The processes `up` runs for a workload (`gvc/name`), for `-connect`; default: none. */
  readonly replicaProcesses?: (key: string) => readonly ReplicaProcess[];
  /** The URL of a host name on the ingress listener; default `http://HOST`. */
  readonly endpointUrl?: (host: string) => string;
  /** Items in a page of a list (default 100; a request may ask for `limit` up to 1000). */
  readonly pageSize?: number;
  /** Time a client has to send a whole body (default 30 s) and its largest size (default 1 MiB). */
  readonly bodyTimeoutMs?: number;
  readonly maxBodyBytes?: number;
  /** Timers of the body's deadline; default the system's. */
  readonly clock?: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
}

export const DEFAULT_PAGE_SIZE = 100;

/** `api.<internal domain>`: the API's name through a replica's outbound listener. */
export function apiHost(internalDomain: string): string {
  return `api.${internalDomain.toLowerCase()}`;
}

export class PlatformApi {
  private readonly deps: ApiDeps;
  private listener: Listener | undefined;
  /** `api.<internal domain>`: the domains are flags, fixed for the process's life. */
  private readonly host: string;

  constructor(opts: PlatformApiOptions) {
    const now = opts.now ?? Date.now;
    this.deps = {
      store: opts.store,
      org: opts.org,
      tokenSecret: opts.tokenSecret,
      ...(opts.operatorKey !== undefined ? { operatorKey: opts.operatorKey } : {}),
      since: new Date(now()).toISOString(),
      now: () => new Date(now()).toISOString(),
      logger: opts.logger.child({ component: 'api' }),
      deployments: opts.deployments ?? (() => []),
      replicaProcesses: opts.replicaProcesses ?? (() => []),
      endpointUrl: opts.endpointUrl ?? ((host) => `http://${host}`),
      pageSize: opts.pageSize ?? DEFAULT_PAGE_SIZE,
      body: { maxBytes: opts.maxBodyBytes ?? MAX_BODY_BYTES, timeoutMs: opts.bodyTimeoutMs ?? BODY_TIMEOUT_MS, clock: opts.clock ?? systemClock },
    };
    this.host = apiHost(opts.store.current.settings.internalDomain);
  }

  /** `SVC_ENDPOINT` of a replica whose outbound calls go through its outbound listener. */
  endpoint(): string {
    return `http://${this.host}`;
  }

  /** The `--api` listener's base URL; undefined before `listen()`. */
  get url(): string | undefined {
    const a = this.listener?.address;
    return a && `http://${a.host.includes(':') ? `[${a.host}]` : a.host}:${a.port}`;
  }

  /** Answers one request as `caller` (undefined: outside every workload). */
  handle(req: ApiRequest, res: ApiResponse, caller: ApiCaller | undefined): void {
    void handleApi(this.deps, req, res, caller);
  }

  /** Whether `authority` (`host[:port]`) names the API through an outbound listener. */
  private isApi(authority: string): boolean {
    // Compared before lower-casing: the usual request (any other host) costs no new string.
    if (authority.length !== this.host.length && authority.length !== this.host.length + 3) return false;
    const a = authority.toLowerCase();
    return a === this.host || a === `${this.host}:80`;
  }

  /**
   * A replica's outbound listener's handlers with the API in front: requests for the API's name
   * (absolute-form through the proxy, or inside a CONNECT to it) are answered here as `caller`;
   * everything else goes to `inner` unchanged.
   */
  wrap(inner: ListenerHandlers, caller: ApiCaller): ListenerHandlers {
    let tunnel: http.Server | undefined;
    return {
      request: (req, res) => {
        const authority = routingAuthority(req.url ?? '', (req.headers[':authority'] as string | undefined) ?? req.headers.host ?? '');
        if (this.isApi(authority)) this.handle(req, res, caller);
        else inner.request(req, res);
      },
      ...(inner.upgrade ? { upgrade: inner.upgrade } : {}),
      connect: (req, socket: Duplex, head) => {
        if (!this.isApi(req.url ?? '')) return inner.connect?.(req, socket, head);
        // Served as HTTP/1.1 in the tunnel, whatever Host the requests in it carry: the tunnel was
        // opened to the API, from this replica.
        tunnel ??= http.createServer((r, s) => this.handle(r, s, caller));
        socket.write(CONNECTION_ESTABLISHED);
        if (head.length > 0) socket.unshift(head);
        tunnel.emit('connection', socket);
      },
    };
  }

  /** Starts the `--api` listener (callers outside every workload). */
  async listen(address: string, limits?: ListenerLimits): Promise<Listener> {
    const { host, port } = parseHostPort(address);
    this.listener = await listen({
      host, port,
      handlers: { request: (req, res) => this.handle(req, res, undefined) },
      ...(limits ? { limits } : {}),
    });
    return this.listener;
  }

  /** Stops the `--api` listener (requests in flight finish). */
  async close(): Promise<void> {
    const l = this.listener;
    this.listener = undefined;
    if (!l) return;
    await l.stopAccepting();
    l.destroy();
  }
}
