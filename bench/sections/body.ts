/** HTTP/1.1, 1 MiB request bodies (`body`): the HTTP table's rows, each request a POST the upstream reads whole. */
import { postScript, wrk } from '../lib/load.js';
import { BODY_BYTES, opts } from '../options.js';
import { expectBody } from './checks.js';
import { httpRows } from './http.js';
import type { SectionSpec } from './table.js';

export function bodySection(tools: Record<string, string | undefined>, workDir: string): SectionSpec {
  const lua = postScript(workDir, BODY_BYTES);
  return {
    id: 'body',
    duration: opts.shortDuration,
    title: 'HTTP/1.1, 1 MiB request bodies',
    description: `wrk, 1 thread, ${opts.bodyConnections} connections, each request a POST of 1 MiB (1,048,576 bytes) that the upstream reads to the end before answering 2 bytes. MB/s = 10^6 bytes of request body per second.`,
    unit: 'req/s',
    bytesPerRequest: BODY_BYTES,
    refs: [{ key: 'direct', label: 'direct' }, { key: 'hp3', label: 'http-proxy-3' }],
    rows: httpRows(tools),
    drive: (t, seconds) => wrk({ url: `http://127.0.0.1:${t.port}/`, connections: opts.bodyConnections, seconds, script: lua, ...(t.host ? { host: t.host } : {}) }),
    check: expectBody,
    notes: ['nginx streams the body (proxy_request_buffering off) like every other row, instead of spooling it to a temporary file first.'],
  };
}
