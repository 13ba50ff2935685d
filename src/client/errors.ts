/**
 * How a failed command reports on stderr, as the platform CLI does: the API's error body (or, with no
 * body of that shape, `{status, message}`; with no answer, `{code, message}`) in a list, in `-o`'s
 * format (JSON when `-o` is not given, and for `-o names`, where the platform CLI prints nothing and
 * exits 0), followed by an empty line; exit code 1. Other failures (a profile that does not exist, a
 * file that does not parse) are one `svcproxy: MESSAGE` line. A hint line may follow: what to do when
 * no local `up` answers, or when TLS refused the server. Pure.
 */
import { format, type Output } from './format/index.js';
import { HttpFailure, Unreachable } from './http.js';

/** What the platform CLI prints of a failure: the error body, `{status, message}` or `{code, message}`. */
export function errorObject(err: HttpFailure | Unreachable): unknown {
  if (err instanceof Unreachable) return { code: err.code, message: err.message };
  const body = err.answer.body as { status?: unknown } | null;
  if (body !== null && typeof body === 'object' && body.status) return body;
  return { status: err.answer.status, message: body };
}

/** The stderr text of an API failure, in `output` (undefined: JSON). */
export function failureText(err: HttpFailure | Unreachable, output: Output | undefined, vendor: string): string {
  const obj = errorObject(err);
  const as: Output = output === undefined || output === 'names' || output === 'tf' || output === 'crd' ? 'json' : output;
  return `${format([obj], { output: as, color: false, ts: 'iso', vendor })}\n\n`;
}

const TLS_CODES = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|HOSTNAME/;

/** A line that says what to do about a failure, when there is something to say. */
export function failureHint(err: HttpFailure | Unreachable, ctx: { local: boolean; endpoint: string; hasToken: boolean; cwd: string }): string | undefined {
  if (err instanceof Unreachable) {
    if (err.code === 'ECONNREFUSED' && ctx.local) {
      return `svcproxy: no platform API answers at ${ctx.endpoint} (the default: a local svcproxy up); start svcproxy up, or name an endpoint with --profile or --endpoint`;
    }
    if (TLS_CODES.test(err.code)) return `svcproxy: TLS refused ${ctx.endpoint} (${err.code}); trust its CA with NODE_EXTRA_CA_CERTS=FILE, or skip the check with --insecure (-k)`;
    return undefined;
  }
  if (ctx.local && !ctx.hasToken && (err.answer.status === 401 || err.answer.status === 403)) {
    return `svcproxy: sent without a credential: ${ctx.cwd} has no .svcproxy/api-token (run svcproxy rest in the folder svcproxy up runs in, or give --token or --profile)`;
  }
  return undefined;
}

/** A failure that is not the API's: a file that cannot be read or parsed, a refused rendering (exit 1). */
export class ClientError extends Error {}
