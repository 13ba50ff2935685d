/**
 * A plain HTTP client of `up`'s platform API (DESIGN §13) for tests: one request per call on a new
 * connection, JSON in and out, the operator key unless told otherwise; and the check that a refusal
 * has the spec's error body.
 */
import http from 'node:http';
import { join } from 'node:path';
import { startUp, type Up } from '../../src/roles/up.js';
import { defaultSettings } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import type { Test } from 'tap';

export interface Reply {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly json: Record<string, any>;
  readonly text: string;
}

export type Call = (method: string, path: string, body?: unknown, headers?: http.OutgoingHttpHeaders) => Promise<Reply>;

/** A client of the API at `url` sending `key` (the operator key) unless a call's headers say otherwise. */
export function apiClient(url: string, key: string | undefined): Call {
  const api = new URL(url);
  return (method, path, body, headers = {}) => new Promise((resolve, reject) => {
    const text = body === undefined ? undefined : typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    const req = http.request({
      host: api.hostname, port: api.port, method, path, agent: false,
      headers: {
        ...(key !== undefined ? { authorization: `Bearer ${key}` } : {}),
        ...(text !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const s = Buffer.concat(chunks).toString();
        let json: Record<string, unknown> = {};
        try {
          json = JSON.parse(s) as Record<string, unknown>;
        } catch {
          // No body (204).
        }
        resolve({ status: res.statusCode!, headers: res.headers, json, text: s });
      });
    });
    req.on('error', reject);
    req.end(text);
  });
}

/** The reply is a refusal with `status` and `code`, in the spec's error body. */
export function isError(t: Test, r: Reply, status: number, code: string): void {
  t.equal(r.status, status, `${status} ${code}: ${r.text}`);
  t.equal(r.json.code, code);
  t.same(Object.keys(r.json).sort(), ['code', 'details', 'id', 'message', 'status']);
}

/** Every item of a list or query answer, following its `rel: next` links. */
export async function allPages(call: Call, first: Reply): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [...(first.json.items as Record<string, unknown>[])];
  let reply = first;
  for (;;) {
    const next = (reply.json.links as { rel: string; href: string }[]).find((l) => l.rel === 'next')?.href;
    if (next === undefined) return items;
    reply = await call('GET', next);
    if (reply.status !== 200) throw new Error(`${next}: ${reply.status} ${reply.text}`);
    items.push(...(reply.json.items as Record<string, unknown>[]));
  }
}

/**
 * `up` on `records` (given, or the records of files), its state in `DIR/state` and its API on a free
 * port with `api`'s other options; no file watching, and no overload shedding (a loaded machine must
 * not answer a test's request 503).
 */
export function upWithApi(
  dir: string,
  records: { readonly records: Record<string, unknown>[] } | { readonly configPaths: string[] },
  api: { readonly pageSize?: number; readonly bodyTimeoutMs?: number } = {},
): Promise<Up> {
  return startUp({
    settings: defaultSettings,
    ...records,
    listen: ['127.0.0.1:0'],
    api: { address: '127.0.0.1:0', ...api },
    logger: silentLogger(),
    watch: false,
    stateDir: join(dir, 'state'),
    limits: { maxEventLoopDelayMs: 0 },
  });
}

/** `upWithApi` on the records of `file` (`pageSize` items a page when given). */
export function upOnFile(dir: string, file: string, pageSize?: number): Promise<Up> {
  return upWithApi(dir, { configPaths: [file] }, pageSize === undefined ? {} : { pageSize });
}
