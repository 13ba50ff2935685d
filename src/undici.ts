/**
 * undici, imported once by the first caller that needs it: ext_authz in HTTP mode
 * (extauth/http-client.ts) and the OTLP/HTTP trace exporter (tracing/otlp.ts). Importing it costs a
 * process about 20 MiB of memory (measured: RSS before and after `import('undici')` on Node 20), and
 * the request path itself does not use it (src/http1/), so a proxy whose configuration has neither
 * never loads it.
 */
type Undici = typeof import('undici');

let undici: Promise<Undici> | undefined;

export function loadUndici(): Promise<Undici> {
  return (undici ??= import('undici'));
}
