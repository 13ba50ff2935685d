/**
 * What the platform API's handlers are given (handler.ts builds it per request): the dependencies
 * of the API, the request, who sent it, the snapshot in force and the route's parameters, and what
 * a handler answers. Types only.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { Logger } from 'pino';
import type { Clock } from '../../deps.js';
import type { ConfigStore } from '../../config/store.js';
import type { Snapshot } from '../../config/model.js';
import type { DeploymentStatus } from '../deployments.js';
import type { Principal } from './auth.js';
import type { RecordIndex } from './views.js';

export type ApiRequest = IncomingMessage | Http2ServerRequest;
export type ApiResponse = ServerResponse | Http2ServerResponse;

export interface ApiDeps {
  readonly store: ConfigStore;
  /** The org `up` serves (the org record's name, else the mesh's default). */
  org(): string;
  /** The key of every `SVC_TOKEN` of this run (src/local/env.ts). */
  readonly tokenSecret: string | Uint8Array;
  /** The operator key (`.svcproxy/api-token`): an org administrator; none: no caller is one. */
  readonly operatorKey?: string;
  /** When the records without `created` were created: `up`'s start. */
  readonly since: string;
  /** Wall clock, ISO 8601. */
  now(): string;
  readonly logger: Logger;
  /** A workload's deployments, one per location (src/local/deployments.ts); none without processes. */
  deployments(key: string): readonly DeploymentStatus[];
  /** The URL of a host name on `up`'s ingress listener (a workload's `status.endpoint`). */
  endpointUrl(host: string): string;
  /** The processes `up` runs for a workload (`gvc/name`), with their environment: `-connect` (connect.ts). */
  replicaProcesses(key: string): readonly ReplicaProcess[];
  /** Items in a page of a list unless the request says `limit`. */
  readonly pageSize: number;
  readonly body: BodyLimits;
}

/** One process of a replica `up` runs (src/local/supervisor.ts `processes()`). */
export interface ReplicaProcess {
  readonly location: string;
  readonly replica: string;
  readonly container: string;
  readonly ready: boolean;
  readonly env: Readonly<Record<string, string>>;
  readonly cwd: string;
}

/** How a request body is read (body.ts): its size and time limits. */
export interface BodyLimits {
  readonly maxBytes: number;
  readonly timeoutMs: number;
  readonly clock: Pick<Clock, 'setTimeout' | 'clearTimeout'>;
}

/** What a handler answers: a status, a JSON body (none for 204), headers. */
export interface Answer {
  readonly status: number;
  readonly body?: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

export interface ApiContext {
  readonly deps: ApiDeps;
  readonly snapshot: Snapshot;
  readonly index: RecordIndex;
  readonly org: string;
  readonly principal: Principal;
  readonly req: ApiRequest;
  /** The route's parameters (`org`, `gvc`, `name`, ...), decoded. */
  readonly params: Readonly<Record<string, string | undefined>>;
  readonly query: URLSearchParams;
}
