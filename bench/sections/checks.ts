/**
 * What the rows check before they are measured (the answer is what the row claims: 200, the body,
 * the filters in the path, HTTP/2) and read after (access-log lines, the sink's entries, metrics).
 */
import { readFileSync } from 'node:fs';
import { Fleet, stats } from '../lib/fleet.js';
import { h2Get, httpRequest, sleep } from '../lib/proc.js';
import { BODY_BYTES } from '../options.js';
import type { Target } from './table.js';

export async function expectOk(t: Target): Promise<string | undefined> {
  const r = await httpRequest(t.port, { ...(t.host ? { host: t.host } : {}), ...(t.tls ? { tls: true } : {}) });
  if (r.status !== 200 || r.body !== 'ok') return `a GET answered ${r.status} ${r.body.slice(0, 120)}`;
  if (t.tls && r.tlsProtocol !== 'TLSv1.3') return `the TLS connection negotiated ${r.tlsProtocol ?? 'nothing'}, not TLSv1.3`;
  return undefined;
}

export async function expectBody(t: Target): Promise<string | undefined> {
  const r = await httpRequest(t.port, { method: 'POST', body: Buffer.alloc(BODY_BYTES, 0x78), headers: { 'content-type': 'application/octet-stream' }, timeoutMs: 10_000, ...(t.host ? { host: t.host } : {}) });
  if (r.status !== 200) return `a 1 MiB POST answered ${r.status} ${r.body.slice(0, 120)}`;
  if (r.headers['x-received'] !== String(BODY_BYTES)) return `the upstream received ${String(r.headers['x-received'])} bytes of ${BODY_BYTES}`;
  return undefined;
}

/** The sidecar's filters in the path: a denied request gets the auth server's 403; answers carry the rate limit. */
export async function expectFilters(t: Target, want: { auth: boolean; rateLimit: boolean }): Promise<string | undefined> {
  const ok = await httpRequest(t.port);
  if (ok.status !== 200) return `a GET answered ${ok.status} ${ok.body.slice(0, 120)}`;
  const denied = await httpRequest(t.port, { headers: { 'x-bench-deny': '1' } });
  if (want.auth && denied.status !== 403) return `external auth is not in the path (a request the auth server denies answered ${denied.status})`;
  if (!want.auth && denied.status !== 200) return `a request with x-bench-deny answered ${denied.status}: external auth is in the path of a row without it`;
  const limited = ok.headers['x-ratelimit-limit'] !== undefined;
  if (want.rateLimit && !limited) return 'rate limiting is not in the path (no x-ratelimit-limit on the answer)';
  if (!want.rateLimit && limited) return 'x-ratelimit-limit on the answer: rate limiting is in the path of a row without it';
  return undefined;
}

/** Access-log lines (pino JSON, `"component":"access"`) in a sidecar's log file, and their bytes. */
export function accessLines(file: string): { lines: number; bytes: number } {
  let lines = 0;
  let bytes = 0;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return { lines, bytes };
  }
  for (const line of text.split('\n')) {
    if (!line.includes('"component":"access"')) continue;
    lines++;
    bytes += line.length + 1;
  }
  return { lines, bytes };
}

/** The access-log sink's counts once they stop growing (the sidecar flushes every second). */
export async function settledEntries(f: Fleet): Promise<Awaited<ReturnType<typeof stats>>> {
  let s = await stats(f.ports['als-stats']);
  for (let i = 0; i < 20; i++) {
    await sleep(250);
    const next = await stats(f.ports['als-stats']);
    if (next.entries === s.entries && (next.entries ?? 0) > 0 && i >= 5) return next;
    s = next;
  }
  return s;
}

/** Prometheus text → metric name → sum over its label sets. */
export function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    out.set(m[1]!, (out.get(m[1]!) ?? 0) + Number(m[3]));
  }
  return out;
}

export async function expectH2(t: Target): Promise<string | undefined> {
  const status = await h2Get(t.port, t.host);
  return status === 200 ? undefined : `an h2c GET answered ${status}`;
}
