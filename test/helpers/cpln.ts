/**
 * The platform's own CLI (`cpln`, devDependency @controlplane/cli) run as a user runs it against an
 * endpoint: a real process with `CPLN_ENDPOINT`, `CPLN_TOKEN`, `CPLN_ORG`, `CPLN_GVC`, its own
 * `CPLN_HOME` (profiles never read from or written to `~`) and `CPLN_SKIP_UPDATE_CHECK=1` (else each
 * start asks the npm registry for a newer version). It retries a 5xx up to ten times with backoff:
 * answers of 5xx are tested with a plain HTTP client instead.
 */
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
/** The CLI's entry script, run with this Node. */
export const CPLN_MAIN = join(dirname(require.resolve('@controlplane/cli/package.json')), 'dist/src/cpln.js');

export interface CplnOptions {
  readonly endpoint?: string;
  readonly token?: string;
  readonly org?: string;
  readonly gvc?: string;
  /** `CPLN_HOME`: where its profiles live (a temporary folder of the test). */
  readonly home: string;
  /** Written to its standard input, then closed. */
  readonly stdin?: string;
  readonly env?: Readonly<Record<string, string>>;
  readonly cwd?: string;
}

export interface CplnResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export function cpln(args: readonly string[], opts: CplnOptions): Promise<CplnResult> {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: opts.home,
    CPLN_HOME: opts.home,
    CPLN_SKIP_UPDATE_CHECK: '1',
    NO_COLOR: '1',
    ...(opts.endpoint !== undefined ? { CPLN_ENDPOINT: opts.endpoint } : {}),
    ...(opts.token !== undefined ? { CPLN_TOKEN: opts.token } : {}),
    ...(opts.org !== undefined ? { CPLN_ORG: opts.org } : {}),
    ...(opts.gvc !== undefined ? { CPLN_GVC: opts.gvc } : {}),
    ...opts.env,
  };
  return new Promise((resolve, reject) => {
    const child = execFile(process.execPath, [CPLN_MAIN, ...args], { env, cwd: opts.cwd ?? opts.home, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : undefined;
      if (code === undefined) reject(err);
      else resolve({ code, stdout, stderr });
    });
    child.stdin?.end(opts.stdin ?? '');
  });
}
