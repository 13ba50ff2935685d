/**
 * The IPC protocol between the `--workers` primary and its workers (node:cluster's channel, JSON).
 * Every message carries `svcproxy` naming its type, so messages of other users of the channel
 * (node:cluster's own, prom-client's) are told apart and ignored.
 *
 * Start: the worker says `hello` once it listens for messages; the primary answers with the
 * configuration in force (`config`); the worker binds and says `ready` (or `failed` with the error,
 * then exits 1). Reload: `config` again, answered by `applied`. `ask` / `answer` carry the admin
 * listener's questions (metrics, the replica table). `drain` stops the worker within `graceMs`.
 */

/** A listener a worker bound (shared with the other workers). */
export interface BoundListener {
  readonly address: string;
  readonly tls: boolean;
  readonly mesh: boolean;
}

/** Questions the primary's admin listener asks every worker. */
export type Question = 'metrics' | 'replicas';

export type ToWorker =
  | { readonly svcproxy: 'config'; readonly generation: number; readonly records: readonly Readonly<Record<string, unknown>>[] }
  | { readonly svcproxy: 'ask'; readonly id: number; readonly what: Question }
  | { readonly svcproxy: 'drain'; readonly graceMs: number };

export type ToPrimary =
  | { readonly svcproxy: 'hello' }
  | { readonly svcproxy: 'ready'; readonly generation: number; readonly listeners: readonly BoundListener[] }
  | { readonly svcproxy: 'failed'; readonly message: string }
  | { readonly svcproxy: 'applied'; readonly generation: number }
  | { readonly svcproxy: 'answer'; readonly id: number; readonly value?: unknown; readonly error?: string };

export function isMessage<T extends { svcproxy: string }>(value: unknown): value is T {
  return typeof value === 'object' && value !== null && typeof (value as { svcproxy?: unknown }).svcproxy === 'string';
}

/** The replica view one worker reports (`/config`'s `replicas`). */
export interface ReplicaView {
  readonly workload: string;
  readonly location: string;
  readonly name: string;
  readonly ready: boolean;
  readonly outstanding: number;
}
