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
  /** An increase request that was decided already (approved or denied) cannot be decided again. */
  already_decided: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  /**
   * An API write that would take a quota past its max (the message names the quota, so cpln does not
   * retry it); 403 for a PUT (`ApiError.withStatus`).
   */
  quota_exceeded: 429,
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
  /** Set by `withStatus`: the code's usual status does not suit the request (see there). */
  private override?: number;

  constructor(readonly code: ApiErrorCode, message: string, readonly details: Readonly<Record<string, unknown>> = {}) {
    super(message);
  }

  get status(): number {
    return this.override ?? API_ERRORS[this.code];
  }

  /**
   * The same refusal answered with `status`: a quota refusal of a `PUT` is 403, not 429, as the
   * platform's CLI retries a 429 to a PUT ten times whatever it says (axios-retry takes a 429 to an
   * idempotent method for a rate limit), so `cpln apply` would wait minutes for the same answer.
   */
  withStatus(status: number): ApiError {
    const copy = new ApiError(this.code, this.message, this.details);
    copy.override = status;
    return copy;
  }

  body(id = randomUUID()): ApiErrorBody {
    return { status: this.status, message: this.message, code: this.code, details: this.details, id };
  }
}
