/**
 * The operator key's file (src/local/api/operator-key.ts, DESIGN §13): written once with mode 0600
 * and reused, made 0600 again when found readable by others, never overwritten when it holds
 * something else; its shape is the platform's service-account key, read by the platform CLI's own
 * parser (`parseSaToken` of @controlplane/cli) as the org and the account it names.
 */
import t from 'tap';
import { chmod, readFile, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { isKeyShaped, isOperatorKey, makeOperatorKey, openOperatorKey, OPERATOR_ACCOUNT } from '../../src/local/api/operator-key.js';
import { authenticate } from '../../src/local/api/auth.js';
import { silentLogger } from '../../src/log.js';
import { tempDir } from '../mesh/fixtures.js';

const require = createRequire(import.meta.url);
const { parseSaToken } = require('@controlplane/cli/dist/src/util/names.js') as { parseSaToken(s: string): { org: string; name: string } | null };

t.test('the key is written 0600 in a new 0700 folder, and read again on the next run', async (t) => {
  const dir = await tempDir(t, 'svcproxy-key-');
  const file = join(dir, 'state', 'api-token');
  const key = await openOperatorKey(file, 'acme', silentLogger());
  t.equal((await stat(file)).mode & 0o777, 0o600);
  t.equal((await stat(join(dir, 'state'))).mode & 0o777, 0o700);
  t.equal((await readFile(file, 'utf8')).trim(), key);
  t.equal(await openOperatorKey(file, 'other-org', silentLogger()), key, 'reused across runs, whatever the org now');
});

t.test('a key file readable by others is made 0600 again', async (t) => {
  const dir = await tempDir(t, 'svcproxy-key-');
  const file = join(dir, 'api-token');
  const key = await openOperatorKey(file, 'acme', silentLogger());
  await chmod(file, 0o644);
  t.equal(await openOperatorKey(file, 'acme', silentLogger()), key);
  t.equal((await stat(file)).mode & 0o777, 0o600);
});

t.test('a file that holds no key is refused, not overwritten', async (t) => {
  const dir = await tempDir(t, 'svcproxy-key-');
  const file = join(dir, 'api-token');
  await writeFile(file, 'my own notes\n', { mode: 0o600 });
  await t.rejects(openOperatorKey(file, 'acme', silentLogger()), /holds no operator key/);
  t.equal(await readFile(file, 'utf8'), 'my own notes\n');
});

t.test('the platform CLI reads the key as a service-account key of the org', async (t) => {
  for (const org of ['acme', 'a', 'org-with-hyphens-0123456789']) {
    const key = makeOperatorKey(org);
    t.ok(isKeyShaped(key), key);
    t.same(parseSaToken(key), { org, name: OPERATOR_ACCOUNT });
  }
  t.not(makeOperatorKey('acme'), makeOperatorKey('acme'), 'a new secret each time');
});

t.test('the key is compared whole: any other token is not the operator', async (t) => {
  const key = makeOperatorKey('acme');
  t.ok(isOperatorKey(key, key));
  t.notOk(isOperatorKey(key, key.slice(0, -1)));
  t.notOk(isOperatorKey(key, `${key}x`));
  t.notOk(isOperatorKey(key, makeOperatorKey('acme')));
  t.same(authenticate(`Bearer ${key}`, undefined, 'secret', [], key), { kind: 'operator' });
  t.same(authenticate(key, undefined, 'secret', [], key), { kind: 'operator' }, 'the key alone, as the spec allows');
  t.same(authenticate(`bearer ${key}`, { workload: 'g/w' }, 'secret', ['g/w'], key), { kind: 'operator' }, 'from a replica too');
  t.throws(() => authenticate(`Bearer ${makeOperatorKey('acme')}`, undefined, 'secret', [], key), { code: 'invalid_token' });
});
