/**
 * `up`'s operator key (DESIGN §13): a service-account key kept in `.svcproxy/api-token`, accepted at
 * `--api` as an org administrator, reused across runs like `.svcproxy/ca/`. It has the platform's
 * service-account key shape, `s<prefix>.<base64url("ORG.NAME.SECRET")>`, which the platform's CLI reads
 * (`cpln profile update P --token KEY` takes the profile's org from it); the org is the one `up`
 * served when the key was made, and only names the profile's default: the key is checked whole.
 *
 * The file is created with mode 0600 by a write to a temporary file and a rename, so a reader never
 * sees half a key; one found readable by others is made 0600 again (and that is logged), and its folder
 * is created 0700. A file that holds no key of this shape is an error, never overwritten: it may be a
 * key the operator wrote there. Keys are compared in constant time.
 */
import { chmod, mkdir, open, readFile, rename, stat, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';

/** The service account the key stands for, as the platform's CLI shows it (`[svcproxy-up]`). */
export const OPERATOR_ACCOUNT = 'svcproxy-up';

/** `s1.<base64url(org.name.secret)>`: the shape of a service-account key. */
const KEY_SHAPE = /^s[A-Za-z0-9]*\.[A-Za-z0-9_-]{16,}$/;

export function makeOperatorKey(org: string, secret: Uint8Array = randomBytes(32)): string {
  return `s1.${Buffer.from(`${org}.${OPERATOR_ACCOUNT}.${Buffer.from(secret).toString('base64url')}`).toString('base64url')}`;
}

/** Whether `text` has the shape of a service-account key (what `makeOperatorKey` writes). */
export function isKeyShaped(text: string): boolean {
  return KEY_SHAPE.test(text);
}

/**
 * The key in `file`, created for `org` when the file does not exist. Throws when the file holds
 * something else, or cannot be read or written.
 */
export async function openOperatorKey(file: string, org: string, logger: Logger): Promise<string> {
  const existing = await readKey(file, logger);
  if (existing !== undefined) return existing;
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  const key = makeOperatorKey(org);
  const tmp = `${file}.${process.pid}.tmp`;
  const handle = await open(tmp, 'wx', 0o600);
  try {
    await handle.writeFile(`${key}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(tmp, file);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  logger.info({ file }, 'platform API: a new operator key was written (mode 0600)');
  return key;
}

async function readKey(file: string, logger: Logger): Promise<string | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const key = text.trim();
  if (!isKeyShaped(key)) throw new Error(`${file}: holds no operator key (delete it, and up writes a new one)`);
  const mode = (await stat(file)).mode & 0o777;
  if ((mode & 0o077) !== 0) {
    await chmod(file, 0o600);
    logger.warn({ file, mode: mode.toString(8) }, 'platform API: the operator key was readable by others; it is mode 0600 again');
  }
  return key;
}

/** Whether `token` is `key`, in constant time (the lengths compared first say nothing secret). */
export function isOperatorKey(key: string, token: string): boolean {
  const want = Buffer.from(key);
  const given = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}
