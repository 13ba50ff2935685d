/**
 * Profiles and precedence against the platform CLI's own session (session/session.js and
 * profile/manager.js of the devDependency, run in this process): on generated homes (profiles with and
 * without tokens, a `default` file naming one that exists or not, a single profile), variables
 * (`CPLN_PROFILE`, `_ENDPOINT`, `_TOKEN`, `_ORG`, `_GVC`, some empty) and flags, `--vendor cpln`
 * resolves the same profile, endpoint, token, org and GVC, or fails where it fails. The two documented
 * differences are checked as such: with no profile, endpoint or token the client takes the local
 * `up` (the platform CLI refuses), and an endpoint without a token is used without a credential. Also
 * the `svc` vendor's home and variables, SVCPROXY_API, logins' access tokens, and keys' accounts.
 */
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseClientArgs } from '../../src/client/args.js';
import { keyAccount, localEndpoint, openSession, profileHome, SessionError, type Session } from '../../src/client/session.js';
import { makeOperatorKey } from '../../src/local/api/operator-key.js';
import { prng, testSeed } from '../helpers/seed.js';
import { pick } from './fixtures.js';

const require = createRequire(import.meta.url);
const { newDefaultSession } = require('@controlplane/cli/dist/src/session/session.js') as {
  newDefaultSession(env: unknown, args: Record<string, unknown>): { request: { endpoint?: string; token?: string }; context: { org?: string; gvc?: string; profile?: string }; profile: { name: string } };
};
const { ProfileManager } = require('@controlplane/cli/dist/src/profile/manager.js') as { ProfileManager: new (root: string) => unknown };

const seed = testSeed('CLIENT_SESSION_SEED', 38);
t.comment(`seed ${seed} (CLIENT_SESSION_SEED=${seed} replays it)`);
const rand = prng(seed);

const ENDPOINTS = ['http://a.example:8080', 'https://api.example.com', 'http://127.0.0.1:15080'];
const maybe = <T>(v: T, p = 0.4): T | undefined => (rand() < p ? v : undefined);

interface Scenario {
  profiles: { name: string; endpoint?: string; token?: string; org?: string; gvc?: string }[];
  defaultFile?: string;
  env: Record<string, string>;
  args: Record<string, string>;
}

function scenario(): Scenario {
  const names = ['dev', 'prod', 'local'].filter(() => rand() < 0.5);
  const profiles = names.map((name) => ({
    name,
    ...(rand() < 0.9 ? { endpoint: pick(rand, ENDPOINTS) } : {}),
    token: `tok-${name}-${Math.floor(rand() * 1000)}`,
    ...(rand() < 0.6 ? { org: `org-${name}` } : {}),
    ...(rand() < 0.4 ? { gvc: `gvc-${name}` } : {}),
  }));
  const env: Record<string, string> = {};
  for (const [k, v] of [
    ['CPLN_PROFILE', pick(rand, ['dev', 'prod', 'local', 'gone'])],
    ['CPLN_ENDPOINT', pick(rand, ENDPOINTS)],
    ['CPLN_TOKEN', 'tok-env'],
    ['CPLN_ORG', pick(rand, ['org-env', ''])],
    ['CPLN_GVC', pick(rand, ['gvc-env', ''])],
  ] as const) {
    const value = maybe(v, k === 'CPLN_PROFILE' ? 0.25 : 0.35);
    if (value !== undefined) env[k] = value;
  }
  const args: Record<string, string> = {};
  for (const [k, v] of [['profile', pick(rand, ['dev', 'prod', 'gone'])], ['endpoint', pick(rand, ENDPOINTS)], ['token', 'tok-flag'], ['org', 'org-flag'], ['gvc', 'gvc-flag']] as const) {
    const value = maybe(v, k === 'profile' ? 0.25 : 0.3);
    if (value !== undefined) args[k] = value;
  }
  const defaultFile = maybe(pick(rand, ['dev', 'prod', 'gone']), 0.4);
  return { profiles, env, args, ...(defaultFile !== undefined ? { defaultFile } : {}) };
}

function writeHome(s: Scenario): string {
  const home = mkdtempSync(path.join(tmpdir(), 'svcproxy-session-'));
  mkdirSync(path.join(home, 'profiles'), { recursive: true });
  for (const p of s.profiles) {
    writeFileSync(path.join(home, 'profiles', `${p.name}.json`), JSON.stringify({
      name: p.name,
      request: { ...(p.endpoint ? { endpoint: p.endpoint } : {}), token: p.token },
      context: { ...(p.org ? { org: p.org } : {}), ...(p.gvc ? { gvc: p.gvc } : {}) },
      format: {},
    }));
  }
  if (s.defaultFile !== undefined) writeFileSync(path.join(home, 'profiles', 'default'), s.defaultFile);
  return home;
}

/** The platform CLI's session for a scenario: what it resolves, or the error it throws. */
function theirs(s: Scenario, home: string): { endpoint?: string; token?: string; org?: string; gvc?: string; profile?: string } | { error: string } {
  const saved = { ...process.env };
  for (const k of Object.keys(process.env)) if (k.startsWith('CPLN_')) delete process.env[k];
  Object.assign(process.env, s.env, { CPLN_HOME: home });
  try {
    const session = newDefaultSession({ profileManager: new ProfileManager(home), out: process.stdout, err: process.stderr }, { ...s.args });
    return { endpoint: session.request.endpoint, token: session.request.token, org: session.context.org, gvc: session.context.gvc, profile: session.context.profile };
  } catch (e) {
    return { error: (e as Error).message };
  } finally {
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
    Object.assign(process.env, saved);
  }
}

function ours(s: Scenario, home: string, cwd: string): Session | { error: string } {
  const argv = ['rest', 'get', '/x', '--vendor', 'cpln', ...Object.entries(s.args).flatMap(([k, v]) => [`--${k}`, v])];
  try {
    return openSession(parseClientArgs(argv), { env: { ...s.env, CPLN_HOME: home, HOME: home }, cwd, stdoutIsTTY: false, now: Date.now() });
  } catch (e) {
    if (e instanceof SessionError) return { error: e.message };
    throw e;
  }
}

t.test('--vendor cpln resolves as the platform CLI does, on generated homes, variables and flags', async (t) => {
  const cwd = mkdtempSync(path.join(tmpdir(), 'svcproxy-cwd-'));
  t.teardown(() => rmSync(cwd, { recursive: true, force: true }));
  let same = 0;
  let local = 0;
  let bare = 0;
  for (let i = 0; i < 400; i++) {
    const s = scenario();
    const home = writeHome(s);
    try {
      const a = theirs(s, home);
      const b = ours(s, home, cwd);
      const what = JSON.stringify(s);
      if ('error' in a && a.error.startsWith('no profile defined')) {
        t.notOk('error' in b, `${what}: ours does not refuse`);
        if ('error' in b) continue;
        const named = b.sources.endpoint !== 'default' || b.token !== undefined;
        if (!named) {
          t.ok(b.local, `${what}: nothing named: the local up`);
          local++;
        } else {
          t.equal(b.token, undefined, `${what}: an endpoint without a token: no credential`);
          bare++;
        }
        continue;
      }
      if (!('error' in a) && a.endpoint === undefined) {
        // A profile without an endpoint: the platform CLI fails at its first request; the client says so at once.
        t.match('error' in b ? b.error : 'resolved', /names no endpoint/, `${what}: no endpoint`);
        continue;
      }
      if ('error' in a || 'error' in b) {
        t.same('error' in b ? b.error : 'resolved', 'error' in a ? a.error : 'resolved', `${what}: the same failure`);
        continue;
      }
      t.same({ endpoint: b.endpoint, token: b.token, org: b.org, gvc: b.gvc, profile: b.profile?.name }, {
        endpoint: a.endpoint, token: a.token, org: a.org, gvc: a.gvc, profile: a.profile === 'anonymous' ? undefined : a.profile,
      }, what);
      same++;
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }
  t.ok(same > 100, `${same} resolved the same, ${local} took the local up, ${bare} an endpoint without a token`);
});

t.test('svc: SVC_HOME, else $XDG_CONFIG_HOME/svc, else ~/.config/svc; SVC_* variables', async (t) => {
  t.equal(profileHome('svc', { SVC_HOME: '/h', XDG_CONFIG_HOME: '/x', HOME: '/home/u' }), '/h');
  t.equal(profileHome('svc', { XDG_CONFIG_HOME: '/x', HOME: '/home/u' }), '/x/svc');
  t.equal(profileHome('svc', { HOME: '/home/u' }), '/home/u/.config/svc');
  t.equal(profileHome('cpln', { CPLN_HOME: '/c', SVC_HOME: '/h' }), '/c');
  const home = mkdtempSync(path.join(tmpdir(), 'svcproxy-svc-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const session = openSession(parseClientArgs(['rest', 'get', '/x']), {
    env: { SVC_HOME: home, SVC_ENDPOINT: 'http://e.example:1', SVC_TOKEN: 't', SVC_ORG: 'o', SVC_GVC: 'g', CPLN_TOKEN: 'ignored' },
    cwd: home, stdoutIsTTY: false, now: 0,
  });
  t.match(session, { vendor: 'svc', endpoint: 'http://e.example:1', token: 't', org: 'o', gvc: 'g', local: false });
});

t.test('the local up: SVCPROXY_API, the key of the folder (not its org: asked of up), and nothing of it sent elsewhere', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-local-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(path.join(dir, '.svcproxy'));
  const key = makeOperatorKey('acme');
  writeFileSync(path.join(dir, '.svcproxy', 'api-token'), `${key}\n`);
  const open = (argv: string[], env: NodeJS.ProcessEnv = {}) => openSession(parseClientArgs(['rest', 'get', '/x', ...argv]), { env: { HOME: dir, ...env }, cwd: dir, stdoutIsTTY: false, now: 0 });
  t.match(open([]), { endpoint: 'http://127.0.0.1:15080', token: key, local: true, actor: 'svcproxy-up (a service account of acme)' });
  t.equal(open([]).org, undefined, 'the key\'s org is the one up served when it wrote the key: not taken (scope.ts asks GET /org)');
  t.equal(open([], { SVCPROXY_API: '0.0.0.0:25080' }).endpoint, 'http://127.0.0.1:25080');
  t.equal(open([], { SVCPROXY_API: '[::]:25080' }).endpoint, 'http://[::1]:25080');
  t.equal(open(['--org', 'other']).org, 'other');
  t.equal(open(['--endpoint', 'http://elsewhere.example']).token, undefined, 'the key goes to the local up only');
  t.equal(open([], { SVC_ENDPOINT: 'http://elsewhere.example' }).token, undefined);
  t.equal(open(['--token', 'mine']).token, 'mine');
  t.equal(open(['--token', 'mine']).endpoint, 'http://127.0.0.1:15080', 'svc: a token alone goes to the local address');
  t.equal(open(['--token', 'mine', '--vendor', 'cpln']).endpoint, 'https://api.cpln.io', 'cpln: to the platform, as its CLI');
  t.throws(() => open([], { SVCPROXY_API: 'nonsense' }), /SVCPROXY_API must be HOST:PORT/);
  t.equal(localEndpoint({}), 'http://127.0.0.1:15080');
  t.same(keyAccount(key), { org: 'acme', name: 'svcproxy-up' });
  t.equal(keyAccount('not-a-key'), undefined);
});

t.test('a profile logged in by the platform CLI: its access token while valid, a clear message after', async (t) => {
  const home = mkdtempSync(path.join(tmpdir(), 'svcproxy-login-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  mkdirSync(path.join(home, 'profiles'));
  const jwt = (exp: number) => `x.${Buffer.from(JSON.stringify({ exp })).toString('base64url')}.y`;
  const now = 1_800_000_000_000;
  const write = (name: string, access?: string) => writeFileSync(path.join(home, 'profiles', `${name}.json`), JSON.stringify({
    name, request: { endpoint: 'https://api.example.com' }, context: { org: 'o' }, ...(access ? { authInfo: { accessToken: access, email: 'me@example.com' } } : {}),
  }));
  write('fresh', jwt(now / 1000 + 3600));
  write('stale', jwt(now / 1000 - 10));
  write('never');
  const open = (profile: string) => openSession(parseClientArgs(['rest', 'get', '/x', '--vendor', 'cpln', '--profile', profile]), { env: { CPLN_HOME: home }, cwd: home, stdoutIsTTY: false, now });
  t.match(open('fresh'), { token: jwt(now / 1000 + 3600), actor: 'me@example.com', sources: { token: 'login' } });
  t.throws(() => open('stale'), /The login of profile stale has expired[\s\S]*cpln profile update stale --login/);
  t.throws(() => open('never'), /Your profile is not logged in\.\n\nLog in by running: cpln profile update never --login/);
  t.throws(() => open('../etc'), /is not a profile name/);
});

t.test('format settings: flags over the profile\'s; colour only on a terminal without NO_COLOR', async (t) => {
  const home = mkdtempSync(path.join(tmpdir(), 'svcproxy-format-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  mkdirSync(path.join(home, 'profiles'));
  writeFileSync(path.join(home, 'profiles', 'p.json'), JSON.stringify({ name: 'p', request: { endpoint: 'http://x.example', token: 't', timeout: 7 }, format: { output: 'yaml', ts: 'age', color: false } }));
  const open = (argv: string[], env: NodeJS.ProcessEnv = {}, tty = true) => openSession(parseClientArgs(['rest', 'get', '/x', '--profile', 'p', ...argv]), { env: { SVC_HOME: home, ...env }, cwd: home, stdoutIsTTY: tty, now: 0 });
  t.match(open([]), { output: 'yaml', ts: 'age', color: false, timeoutMs: 7000 });
  t.match(open(['-o', 'json', '--ts', 'iso', '--color']), { output: 'json', ts: 'iso', color: true });
  t.equal(open(['--color'], { NO_COLOR: '1' }).color, false);
  t.equal(open(['--color'], {}, false).color, false);
  writeFileSync(path.join(home, 'profiles', 'p.json'), JSON.stringify({ name: 'p', request: { endpoint: 'http://x.example', token: 't' }, format: { output: 'xml' } }));
  t.throws(() => open([]), /format\.output must be one of/);
});
