/**
 * Who a platform API request acts as (platform spec, Authentication; DESIGN §12). `Authorization:
 * Bearer <SVC_TOKEN>` (or the raw token) acts as its workload only when the request came through one
 * of that workload's replicas' outbound listeners: the listener that took the connection names the
 * caller, nothing the client sends. The same token from another workload's replica, or from outside
 * every workload (the `--api` listener), is 403 `token_outside_workload`; a token that is no
 * workload's token of this run is 403 `invalid_token` (the spec has no 401). No credential at all is
 * the anonymous caller. The operator key (`.svcproxy/api-token`, operator-key.ts) is an org
 * administrator wherever it comes from. What each may then do is `mayDo`'s: the spec's only grant without an
 * identity is reading the parent org (Authentication 4), so that is all an anonymous caller or a
 * workload without `spec.identityLink` may do; a workload with an identity may do everything the
 * local API serves (policies are not modelled: the identity is taken as granted all of its org).
 * Tokens are compared in constant time (src/local/env.ts). Throws `ApiError` only.
 */
import { isLocalToken } from '../env.js';
import { isOperatorKey } from './operator-key.js';
import { ApiError } from './errors.js';
import type { RawRecord } from '../../config/records.js';

/** The replica whose outbound listener took the request; absent: outside every workload. */
export interface ApiCaller {
  /** `gvc/name`. */
  readonly workload: string;
  readonly replica?: string;
}

export type Principal =
  | { readonly kind: 'anonymous' }
  | { readonly kind: 'workload'; readonly workload: string }
  /** The operator key (`.svcproxy/api-token`, DESIGN §13): an org administrator. */
  | { readonly kind: 'operator' };

const ANONYMOUS: Principal = { kind: 'anonymous' };
const OPERATOR: Principal = { kind: 'operator' };

/** The token of an `Authorization` value: `Bearer T` (any case), or a raw token; undefined when empty. */
export function tokenOf(authorization: string | undefined): string | undefined {
  const value = authorization?.trim() ?? '';
  if (value === '') return undefined;
  const space = value.indexOf(' ');
  if (space < 0) return value;
  if (value.slice(0, space).toLowerCase() !== 'bearer') {
    throw new ApiError('invalid_token', 'the Authorization header must be "Bearer <token>" or the token itself');
  }
  const token = value.slice(space + 1).trim();
  if (token === '') throw new ApiError('invalid_token', 'the Authorization header names no token');
  return token;
}

/**
 * The principal of a request with `authorization` from `caller`. `workloads` are the keys of the
 * workloads in force (a token of a workload that was removed matches none: invalid).
 */
export function authenticate(authorization: string | undefined, caller: ApiCaller | undefined, secret: string | Uint8Array, workloads: Iterable<string>, operatorKey?: string): Principal {
  const token = tokenOf(authorization);
  if (token === undefined) return ANONYMOUS;
  if (operatorKey !== undefined && isOperatorKey(operatorKey, token)) return OPERATOR;
  if (caller !== undefined && isLocalToken(secret, caller.workload, token)) return { kind: 'workload', workload: caller.workload };
  for (const key of workloads) {
    if (key === caller?.workload || !isLocalToken(secret, key, token)) continue;
    const from = caller === undefined ? 'from outside every workload' : 'from another workload\'s replica';
    throw new ApiError('token_outside_workload', `this token acts only from its own workload's replicas; it was sent ${from}`, { caller: caller?.workload ?? null });
  }
  throw new ApiError('invalid_token', 'the token is neither the operator key (.svcproxy/api-token) nor a workload token of this svcproxy up');
}

/**
 * What a route asks to do: read its org (granted without an identity), read, write, reveal a secret,
 * or operate the local platform itself (a quota's max, an increase request's decision: the operator
 * key only, as the platform's own staff decide those), or connect to a replica (its environment
 * holds the replica's `SVC_TOKEN`: the operator key only).
 */
export type Action = 'read-org' | 'read' | 'write' | 'reveal' | 'operate' | 'connect';

/** Throws 403 `permission_denied` unless `principal` may do `action` (see the module comment). */
export function mayDo(principal: Principal, action: Action, workloadRecord: (key: string) => RawRecord | undefined): void {
  if (action === 'read-org' || principal.kind === 'operator') return;
  if (action === 'operate') {
    throw new ApiError('permission_denied', 'only the operator key (.svcproxy/api-token) changes a quota\'s max or decides an increase request');
  }
  if (action === 'connect') {
    throw new ApiError('permission_denied', 'only the operator key (.svcproxy/api-token) reads a replica\'s environment (it holds the replica\'s SVC_TOKEN)');
  }
  if (principal.kind === 'anonymous') {
    throw new ApiError('permission_denied', 'without a credential only the org may be read; send a workload\'s token (Authorization: Bearer $SVC_TOKEN) from its replica');
  }
  if (!hasIdentity(workloadRecord(principal.workload))) {
    throw new ApiError('permission_denied', `workload ${principal.workload} has no identity (spec.identityLink): it may read its org only`, { workload: principal.workload });
  }
}

function hasIdentity(record: RawRecord | undefined): boolean {
  const spec = record?.spec;
  const link = spec !== null && typeof spec === 'object' ? (spec as Record<string, unknown>).identityLink : undefined;
  return typeof link === 'string' && link !== '';
}
