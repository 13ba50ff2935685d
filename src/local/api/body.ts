/**
 * A request body of the platform API, read whole before anything is done with it (so a client that
 * sends slowly holds up no write: writes are queued only once their body is here) and parsed as one
 * JSON or YAML document. Limits: `maxBytes` (413 `payload_too_large` as soon as `Content-Length`
 * says so, or as soon as the bytes streamed pass it, before the rest is read), `timeoutMs` for the
 * whole body (408 `request_timeout`); both answers close an HTTP/1.1 connection, whose unread rest
 * could not be told from a next request. `Content-Type`: `application/json` (or `+json`, or none),
 * or YAML (`application/yaml`, `application/x-yaml`, `text/yaml`, `text/x-yaml`); anything else is
 * 415. Malformed text is 400 `bad_request` with the parser's line and column, its message stripped
 * of the text it quotes (a body may carry a secret). Throws `ApiError` only.
 */
import { ApiError } from './errors.js';
import type { ApiRequest, BodyLimits } from './context.js';
import { jsonErrorOffset } from '../../config/json-error.js';
import { lineAt } from '../../config/load.js';
import { jsonMessage } from '../../config/parser-message.js';
import { readYaml } from '../../yaml.js';

export const MAX_BODY_BYTES = 1024 * 1024;
export const BODY_TIMEOUT_MS = 30_000;

const YAML_TYPES = new Set(['application/yaml', 'application/x-yaml', 'text/yaml', 'text/x-yaml']);

/** The body's format by its `Content-Type`; 415 for one the API does not read. */
export function bodyFormat(contentType: string | undefined): 'json' | 'yaml' {
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (type === '' || type === 'application/json' || type.endsWith('+json')) return 'json';
  if (YAML_TYPES.has(type)) return 'yaml';
  throw new ApiError('unsupported_media_type', `the body must be JSON (application/json) or YAML (application/yaml), not ${type}`);
}

/** Marks an answer that must close its HTTP/1.1 connection (the body's rest was not read). */
export const CLOSE = Symbol('close the connection');

function refuse(code: 'payload_too_large' | 'request_timeout', message: string): ApiError {
  const err = new ApiError(code, message);
  (err as ApiError & { [CLOSE]?: true })[CLOSE] = true;
  return err;
}

export function mustClose(err: ApiError): boolean {
  return (err as ApiError & { [CLOSE]?: true })[CLOSE] === true;
}

/** The whole body as text (UTF-8). */
export function readBody(req: ApiRequest, limits: BodyLimits): Promise<string> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limits.maxBytes) {
    return Promise.reject(refuse('payload_too_large', `the body is over ${limits.maxBytes} bytes (Content-Length ${declared})`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (err: unknown, text?: string): void => {
      if (done) return;
      done = true;
      limits.clock.clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      if (err !== undefined) {
        // Whatever else arrives is dropped; the answer closes the connection.
        req.on('error', () => undefined);
        req.resume();
        reject(err);
      } else {
        resolve(text!);
      }
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limits.maxBytes) return finish(refuse('payload_too_large', `the body is over ${limits.maxBytes} bytes`));
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      try {
        finish(undefined, new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks)));
      } catch {
        finish(new ApiError('bad_request', 'the body is not UTF-8 text'));
      }
    };
    const onError = (err: Error): void => finish(err);
    const timer = limits.clock.setTimeout(() => finish(refuse('request_timeout', `the body did not arrive whole within ${limits.timeoutMs / 1000} s`)), limits.timeoutMs);
    (timer as { unref?: () => void }).unref?.();
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}

/** One JSON or YAML document; 400 with the line and column of a syntax error. */
export function parseBody(text: string, format: 'json' | 'yaml'): unknown {
  const body = text.startsWith('\uFEFF') ? text.slice(1) : text;
  if (body.trim() === '') throw new ApiError('bad_request', 'the body is empty');
  if (format === 'json') {
    try {
      return JSON.parse(body) as unknown;
    } catch (e) {
      const at = lineAt(body, Math.max(0, jsonErrorOffset(body)));
      const message = jsonMessage((e as Error).message);
      throw new ApiError('bad_request', `the body is not valid JSON: line ${at.line}, column ${at.col}: ${message}`, { line: at.line, column: at.col, error: message });
    }
  }
  const read = readYaml(body);
  if (!read.ok) {
    const { line, column, message } = read.error;
    throw new ApiError('bad_request', `the body is not valid YAML: line ${line}, column ${column}: ${message}`, { line, column, error: message });
  }
  const values = read.docs.filter((d) => d.value !== null && d.value !== undefined);
  if (values.length !== 1) throw new ApiError('bad_request', `the body must be one YAML document, not ${values.length}`);
  return values[0]!.value;
}
