/** WebSocket ping-pong (`ws`) through the proxies (bench/README.md). */
import { script } from '../lib/fleet.js';
import { nodeClient } from '../lib/load.js';
import { opts } from '../options.js';
import { httpRows } from './http.js';
import type { SectionSpec } from './table.js';

export function wsSection(tools: Record<string, string | undefined>): SectionSpec {
  return {
    id: 'ws',
    duration: opts.shortDuration,
    title: 'WebSocket messages',
    description: `${opts.wsConnections} WebSocket connections (bench/clients/ws-load.ts), each sending a 32-byte text message and waiting for the echo before the next; the upstream is a raw RFC 6455 echo in the HTTP upstream process. Rate = round trips per second.`,
    unit: 'msg/s',
    refs: [{ key: 'direct', label: 'direct' }, { key: 'hp3', label: 'http-proxy-3' }],
    rows: httpRows(tools),
    drive: (t, seconds) => nodeClient(script('clients/ws-load.js'), [t.port, t.host ?? `127.0.0.1:${t.port}`, opts.wsConnections, seconds], seconds),
  };
}
