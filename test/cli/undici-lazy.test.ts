/**
 * undici costs a process about 20 MiB when it is imported, and svcproxy's request path does not use
 * it (src/http1/): only ext_authz in HTTP mode and the OTLP/HTTP trace exporter do, through
 * src/undici.ts. Checked two ways: no source file but src/undici.ts imports it at run time (type
 * imports are erased), and a running sidecar, probed at its exit by a module preloaded with
 * `--import`, has it in Node's CommonJS module cache (undici is a CommonJS package) only when its
 * configuration asks for HTTP-mode ext_authz — after answering requests either way.
 */
import t, { type Test as Tap } from 'tap';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { records, startHttpServer, yamlDocuments } from '../helpers/harness.js';
import { freePort } from '../fixtures/ratelimit/servers.js';
import { answerThreeThenStop } from '../helpers/proxy-process.js';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));
const LOCATION = 'aws-us-east-2';

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sources(full);
    return e.name.endsWith('.ts') ? [full] : [];
  });
}

t.test('only src/undici.ts imports undici at run time', async (t) => {
  // A value import, a bare one, a dynamic import (not `typeof import('undici')`, a type) or a require.
  const valueImport = /^\s*import\s+(?!type\b)[^;]*?from\s+['"]undici['"]|^\s*import\s+['"]undici['"]|(?<!typeof\s+)import\(\s*['"]undici['"]\s*\)|require\(\s*['"]undici['"]\s*\)/m;
  const importers = sources(SRC).filter((f) => valueImport.test(readFileSync(f, 'utf8'))).map((f) => path.relative(SRC, f));
  t.same(importers, ['undici.ts']);
});

const PROBE = `
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
process.on('exit', () => {
  const loaded = Object.keys(require('node:module')._cache).some((f) => f.includes(\`\${'/'}node_modules\${'/'}undici\${'/'}\`));
  process.stdout.write('undici loaded: ' + loaded + '\\n');
});
`;

/** Start a sidecar for `tags`, send it three requests, stop it; what the probe printed at its exit. */
async function undiciLoaded(t: Tap, tags: Record<string, string>): Promise<{ answers: (number | string)[]; loaded: string | undefined }> {
  const app = await startHttpServer(t, (_req, res) => res.end('app'));
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-undici-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(path.join(dir, 'probe.mjs'), PROBE);
  writeFileSync(path.join(dir, 'config.yaml'), yamlDocuments(records({ replicas: { [LOCATION]: [`127.0.0.1:${app.port}`] }, tags })));
  const { answers, code, output } = await answerThreeThenStop(t, ['sidecar', '--config', dir, '--app', `127.0.0.1:${app.port}`, '--gvc', 'shop', '--workload', 'api', '--location', LOCATION, '--replica', 'api-0'], {
    nodeArgs: ['--import', pathToFileURL(path.join(dir, 'probe.mjs')).href],
    extraArgs: ['--log-level', 'warn'],
  });
  t.equal(code, 0, 'the sidecar exited 0 on SIGTERM');
  return { answers, loaded: /undici loaded: (\w+)/.exec(output)?.[1] };
}

t.test('an untagged sidecar serves without loading undici', async (t) => {
  const { answers, loaded } = await undiciLoaded(t, {});
  t.same(answers, ['app', 'app', 'app'], 'the app answered through the sidecar');
  t.equal(loaded, 'false', 'undici is not in the module cache at exit');
});

t.test('a sidecar with ext_authz in HTTP mode loads it', async (t) => {
  // Nothing listens at the auth address: each check is a connection refused through undici's pool,
  // answered 403 under fail-closed.
  const authPort = await freePort();
  const { answers, loaded } = await undiciLoaded(t, {
    'svc/externalAuthAddress': '127.0.0.1',
    'svc/externalAuthPort': String(authPort),
    'svc/externalAuthProtocol': 'http',
    'svc/externalAuthScheme': 'http',
    'svc/externalAuthFailureAllow': 'false',
  });
  t.same(answers, [403, 403, 403], 'each request checked (and refused) before the app');
  t.equal(loaded, 'true', 'undici is in the module cache at exit');
});
