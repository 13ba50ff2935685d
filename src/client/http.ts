/**
 * The client's HTTP exchanges with the platform API (node:http and node:https, no other library, so
 * a command starts fast): the platform CLI's request headers (`Accept`, `User-Agent`, a session id
 * header `x-<vendor>-session`, `Authorization: Bearer TOKEN`, then the user's `-H`, which replace
 * same-named ones), a JSON body, the answer's body read as JSON when it is JSON and as text otherwise.
 * With `-d` every exchange is written to stderr in the platform CLI's layout, the token shown as
 * `abc...xyz`. Bounds: one deadline per exchange (default 60 s; a profile's `request.timeout`), 64 MiB
 * of answer. An answer that is not 2xx (redirects are not followed) is an `HttpFailure`; no answer
 * (refused, reset, timed out, a TLS error) is `Unreachable`. Retries, with backoff (`Retry-After`
 * honoured, at most 20 s): 429 that is not about a quota, and 502/503/504 or a reset connection for
 * GET, PUT, DELETE and HEAD, three times at most; a refused connection is not retried (the platform
 * CLI retries it for minutes).
 */
import http, { type IncomingHttpHeaders } from 'node:http';
import type https from 'node:https';
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';
import type { Session } from './session.js';

export const MAX_ANSWER_BYTES = 64 * 1024 * 1024;
const MAX_RETRIES = 3;
const MAX_DELAY_MS = 20_000;
const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);

export interface Answer {
  readonly status: number;
  readonly statusText: string;
  readonly headers: IncomingHttpHeaders;
  /** Parsed JSON, else the text; `''` when the answer had no body. */
  readonly body: unknown;
}

/** An answer whose status is not 2xx. */
export class HttpFailure extends Error {
  /** A line the entry prints after the error body (what became of the user's work). */
  note?: string;

  constructor(readonly answer: Answer, readonly method: string, readonly url: string) {
    super(`${method} ${url}: ${answer.status} ${answer.statusText}`);
  }
}

/** No answer: the connection failed, was reset or timed out, or TLS refused the server. */
export class Unreachable extends Error {
  note?: string;

  constructor(readonly code: string, message: string, readonly url: string) {
    super(message);
  }
}

export interface HttpDeps {
  /** Where `-d` and `-v` write. */
  writeErr(text: string): void;
  /** Wall clock (the `-d` lines' times). */
  now(): Date;
  sleep(ms: number): Promise<void>;
  random(): number;
}

export interface RequestInit {
  readonly body?: unknown;
  readonly headers?: readonly (readonly [string, string])[];
  /** `-d` shows this instead of the answer's body (one that holds a credential). */
  readonly hideAnswer?: string;
}

let version: string | undefined;

function userAgent(): string {
  version ??= (createRequire(import.meta.url)('../../package.json') as { version: string }).version;
  return `svcproxy ${version}/ node ${process.version}`;
}

/** A token as `-d` shows it: its first and last three characters (nothing of a short one). */
export function maskToken(value: string): string {
  const token = value.startsWith('Bearer ') ? value.slice('Bearer '.length) : value;
  return token.length >= 12 ? `${token.slice(0, 3)}...${token.slice(-3)}` : '...';
}

function bodyText(body: unknown): string {
  if (body === undefined || body === null || body === '') return '';
  return typeof body === 'string' ? body : JSON.stringify(body, null, 2);
}

/** The delay before retry `n` (0-based): the answer's Retry-After when it has one, else exponential with jitter. */
export function retryDelay(n: number, retryAfter: string | undefined, now: number, random: () => number): number {
  if (retryAfter !== undefined) {
    const seconds = /^\s*\d+\s*$/.test(retryAfter) ? Number(retryAfter) * 1000 : Date.parse(retryAfter) - now;
    if (Number.isFinite(seconds)) return Math.min(MAX_DELAY_MS, Math.max(0, seconds));
  }
  return Math.min(MAX_DELAY_MS, 500 * 2 ** n + Math.floor(random() * 250));
}

/** Whether an answer says to try again later. */
function retryable(method: string, answer: Answer): boolean {
  if (answer.status === 429) {
    const message = (answer.body as { message?: unknown } | null)?.message;
    return !(typeof message === 'string' && /quota/i.test(message));
  }
  return IDEMPOTENT.has(method) && [502, 503, 504].includes(answer.status);
}

export class ApiClient {
  private readonly session: Session;
  private readonly deps: HttpDeps;
  private readonly debug: boolean;
  private readonly verbose: boolean;
  private readonly sessionId = randomUUID();
  /** Kept-alive connections, one agent per protocol (an exporter may be https where the API is not). */
  private readonly agents = new Map<string, http.Agent>();

  constructor(session: Session, deps: HttpDeps, opts: { debug: boolean; verbose: boolean }) {
    this.session = session;
    this.deps = deps;
    this.debug = opts.debug;
    this.verbose = opts.verbose;
  }

  /** The URL of a target: a path under the endpoint, or a whole URL. */
  urlOf(target: string): URL {
    return /^https?:\/\//i.test(target) ? new URL(target) : new URL(`${this.session.endpoint}${target.startsWith('/') ? '' : '/'}${target}`);
  }

  /** Whether `url` is on the endpoint's origin (the only one the token is sent to unasked). */
  sameOrigin(url: URL): boolean {
    return url.origin === new URL(this.session.endpoint).origin;
  }

  /** One request, retried as the module says; resolves with a 2xx answer. */
  async request(method: string, target: string, init: RequestInit = {}): Promise<Answer> {
    const url = this.urlOf(target);
    for (let attempt = 0; ; attempt++) {
      let answer: Answer;
      try {
        answer = await this.once(method, target, url, init);
      } catch (err) {
        if (err instanceof Unreachable && ['ECONNRESET', 'EPIPE'].includes(err.code) && IDEMPOTENT.has(method) && attempt < MAX_RETRIES) {
          this.note(`retrying ${method} ${target} (${err.message})`);
          continue;
        }
        throw err;
      }
      if (answer.status >= 200 && answer.status < 300) return answer;
      if (!retryable(method, answer) || attempt >= MAX_RETRIES) throw new HttpFailure(answer, method, target);
      const retryAfter = answer.headers['retry-after'];
      const delay = retryDelay(attempt, typeof retryAfter === 'string' ? retryAfter : undefined, this.deps.now().getTime(), this.deps.random);
      this.note(`retrying ${method} ${target} in ${(delay / 1000).toFixed(1)} s (${answer.status} ${answer.statusText})`);
      await this.deps.sleep(delay);
    }
  }

  /** Frees the kept-alive connections (the process may exit). */
  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }

  private note(text: string): void {
    if (this.verbose || this.debug) this.deps.writeErr(`${text}\n`);
  }

  private headers(init: RequestInit, withBody: boolean): [string, string][] {
    const list: [string, string][] = [['Accept', 'application/json, text/plain, */*']];
    if (withBody) list.push(['Content-Type', 'application/json']);
    list.push(['User-Agent', userAgent()], [`x-${this.session.vendor}-session`, this.sessionId]);
    if (this.session.token) list.push(['Authorization', this.session.token.startsWith('Bearer ') ? this.session.token : `Bearer ${this.session.token}`]);
    for (const [name, value] of init.headers ?? []) {
      const i = list.findIndex(([n]) => n.toLowerCase() === name.toLowerCase());
      if (i >= 0) list[i] = [name, value];
      else list.push([name, value]);
    }
    return list;
  }

  private once(method: string, target: string, url: URL, init: RequestInit): Promise<Answer> {
    const withBody = init.body !== undefined && init.body !== null;
    const payload = withBody ? Buffer.from(typeof init.body === 'string' ? init.body : JSON.stringify(init.body)) : undefined;
    const headers = this.headers(init, withBody);
    if (this.debug) {
      const lines = headers.map(([n, v]) => `${n}: ${n.toLowerCase() === 'authorization' ? maskToken(v) : v}`);
      this.deps.writeErr(`${this.deps.now().toLocaleTimeString()} >>>>\n> ${method} ${target}\n> Host: ${url.hostname}\n> ${lines.join('\n> ')}\n\n${withBody ? JSON.stringify(init.body, undefined, 2) : ''}\n>>>>>>>\n`);
    }
    const secure = url.protocol === 'https:';
    const lib: typeof http | typeof https = secure ? (createRequire(import.meta.url)('node:https') as typeof https) : http;
    let agent = this.agents.get(url.protocol);
    if (!agent) this.agents.set(url.protocol, (agent = new lib.Agent({ keepAlive: true, ...(secure ? { rejectUnauthorized: !this.session.insecure } : {}) })));
    const timeoutMs = this.session.timeoutMs;
    return new Promise<Answer>((resolve, reject) => {
      const outgoing: http.OutgoingHttpHeaders = {};
      for (const [n, v] of headers) outgoing[n] = v;
      if (payload) outgoing['Content-Length'] = payload.length;
      let settled = false;
      const fail = (err: Error & { code?: string }): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        req.destroy();
        reject(new Unreachable(err.code ?? 'ERR', err.message, target));
      };
      const req = lib.request(url, { method, headers: outgoing, agent: agent as https.Agent }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ANSWER_BYTES) {
            fail(Object.assign(new Error(`the answer is over ${MAX_ANSWER_BYTES / 1024 / 1024} MiB`), { code: 'ERR_ANSWER_TOO_LARGE' }));
            return;
          }
          chunks.push(chunk);
        });
        res.on('error', fail);
        res.on('end', () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown = text;
          if (text !== '') {
            try {
              body = JSON.parse(text);
            } catch {
              // not JSON: the text as it is
            }
          }
          const answer: Answer = { status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', headers: res.headers, body };
          if (this.debug) {
            const lines = Object.entries(res.headers).map(([n, v]) => `${n}: ${Array.isArray(v) ? v.join(',') : String(v)}`);
            const shown = init.hideAnswer !== undefined && answer.status >= 200 && answer.status < 300 ? `(${init.hideAnswer})` : bodyText(body);
            this.deps.writeErr(`${this.deps.now().toLocaleTimeString()} <<<<\n< ${answer.status} ${answer.statusText}\n< ${lines.join('\n< ')}\n\n${shown}\n<<<<<<<<\n`);
          }
          resolve(answer);
        });
      });
      const timer = setTimeout(() => fail(Object.assign(new Error(`timeout of ${timeoutMs}ms exceeded`), { code: 'ECONNABORTED' })), timeoutMs);
      req.on('error', fail);
      req.end(payload);
    });
  }
}
