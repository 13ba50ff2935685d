/**
 * The platform API's errors (platform spec, Errors): one table from a stable code to its status, and
 * the error body `{status, message, code, details, id}` every refusal carries. The spec lists 400
 * and 403 for GVC creation and 403 for a token used outside its workload, and shows no 401 at all:
 * so every credential the API will not act on (a token of another workload or of another run, a
 * token from outside every workload, a scheme it does not read) is 403, told apart by `code`.
 * Pure; never throws.
 */
import { randomUUID } from 'node:crypto';

export const API_ERRORS = {
  bad_request: 400,
  invalid_record: 400,
  /** A token that is no workload's token of this run. */
  invalid_token: 403,
  /** A workload's token, from another workload's replica or from outside every workload (spec, Authentication 3). */
  token_outside_workload: 403,
  /** A caller the API knows, asking for what it may not (no identity, no credential). */
  permission_denied: 403,
  not_found: 404,
  method_not_allowed: 405,
  /** The body did not arrive whole in time (a client that sends slowly). */
  request_timeout: 408,
  already_exists: 409,
  /** The body's `version` is not the record's: it changed since the client read it. */
  version_conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  internal_error: 500,
} as const satisfies Record<string, number>;

export type ApiErrorCode = keyof typeof API_ERRORS;

export interface ApiErrorBody {
  readonly status: number;
  readonly message: string;
  readonly code: ApiErrorCode;
  readonly details: Readonly<Record<string, unknown>>;
  /** Names this answer (a fresh UUID), as the platform's error ids do. */
  readonly id: string;
}

/** A refusal the handler answers with; thrown only inside the handler and caught there. */
export class ApiError extends Error {
  constructor(readonly code: ApiErrorCode, message: string, readonly details: Readonly<Record<string, unknown>> = {}) {
    super(message);
  }

  get status(): number {
    return API_ERRORS[this.code];
  }

  body(id = randomUUID()): ApiErrorBody {
    return { status: this.status, message: this.message, code: this.code, details: this.details, id };
  }
}
