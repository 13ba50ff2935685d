/**
 * `svcproxy rest edit PATH` (and `quota edit REF`; with `--replace`, the edited resource is sent whole as
 * one PUT instead): the resource as YAML (the platform CLI's order) in `$VISUAL`, else
 * `$EDITOR`, else `vi`, run through `sh -c` (so `code --wait` works) on a file of its own (mode 0600 in
 * a 0700 folder: a resource may hold secrets). When the editor exits 0, what changed is sent as one
 * PATCH: a JSON merge patch (merge-patch.ts) with the `version` that was read, so a change made
 * meanwhile is refused (409) instead of overwritten. Nothing is sent when nothing changed (the
 * platform CLI's message), or when the file is emptied. When the API refuses the change as invalid
 * (400, 422, a quota's 429) or the text is not YAML, the editor opens again with the user's text and
 * the error on top, as kubectl does and the platform CLI does not; saving it unchanged gives up. On
 * any other failure, or giving up, the user's text is kept in its file and the path is said (exit 1).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ClientError, printAnswer, type ClientContext } from './context.js';
import { toYaml } from './format/index.js';
import { jsYaml } from './format/yaml.js';
import { HttpFailure, Unreachable } from './http.js';
import { mergePatch } from './merge-patch.js';

const UNCHANGED = 'Resource was not modified. No changes have been submitted';

/** Statuses after which the user may fix the text and try again. */
function fixable(err: HttpFailure): boolean {
  const status = err.answer.status;
  if (status === 400 || status === 422) return true;
  const body = err.answer.body as { code?: unknown; message?: unknown } | null;
  return status === 429 && (body?.code === 'quota_exceeded' || /quota/i.test(String(body?.message ?? '')));
}

/** `# ` comment lines saying why the API refused the change. */
export function refusalComment(err: HttpFailure): string {
  const body = err.answer.body as { code?: unknown; message?: unknown; details?: { errors?: unknown } } | null;
  const lines = [`The API refused the change: ${err.answer.status} ${typeof body?.code === 'string' ? body.code : err.answer.statusText}`];
  const message = typeof body === 'string' ? body : body?.message;
  if (typeof message === 'string' && message !== '') lines.push(...message.split('\n').map((l) => `  ${l}`));
  const errors = body?.details?.errors;
  if (Array.isArray(errors)) for (const e of errors) lines.push(`  - ${typeof e === 'string' ? e : JSON.stringify(e)}`);
  return lines.map((l) => `# ${l}\n`).join('');
}

function header(pathText: string, actor: string, problem: string, replace: boolean): string {
  return [
    `# You are about to ${replace ? 'REPLACE' : 'PATCH'} ${pathText}`,
    `# You are performing this operation as ${actor}`,
    '#',
    replace ? '# Save and quit to send the resource as it is here, whole, as one PUT. Lines starting with # are ignored;'
      : '# Save and quit to send what changed, as one PATCH. Lines starting with # are ignored;',
    '# an unchanged or empty file sends nothing. If the API refuses the change, this file',
    '# opens again with the error here.',
    '#',
  ].map((l) => `${l}\n`).join('') + problem + '\n';
}

/** Runs the editor on `file`; resolves with its exit code. */
function runEditor(editor: string, file: string, env: NodeJS.ProcessEnv, cwd: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn('/bin/sh', ['-c', `${editor} "$1"`, 'sh', file], { stdio: 'inherit', env, cwd });
    child.on('error', reject);
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}

export async function runEdit(ctx: ClientContext, pathText: string, headers: [string, string][], opts: { readonly replace?: boolean } = {}): Promise<number> {
  const replace = opts.replace === true;
  const { client, io, session } = ctx;
  const original = (await client.request('GET', pathText, { headers })).body;
  if (original === null || typeof original !== 'object' || Array.isArray(original)) {
    throw new ClientError(`GET ${pathText} answered no resource to edit (${typeof original === 'string' ? 'text' : JSON.stringify(original)})`);
  }
  const before = original as Record<string, unknown>;
  const editor = io.env.VISUAL || io.env.EDITOR || 'vi';
  const dir = await mkdtemp(path.join(tmpdir(), 'svcproxy-edit-'));
  const file = path.join(dir, `${String(before.kind ?? 'resource')}-${String(before.name ?? 'edit').replace(/[^A-Za-z0-9._-]/g, '_')}.yaml`);
  let keep = false;
  try {
    let body = toYaml(before, false);
    let problem = '';
    for (let round = 0; ; round++) {
      const written = header(pathText, session.actor, problem, replace) + body;
      await writeFile(file, written, { mode: 0o600 });
      const code = await runEditor(editor, file, io.env, io.cwd);
      if (code !== 0) throw new ClientError(`the editor (${editor}) exited with code ${code}: nothing was sent`);
      const text = await readFile(file, 'utf8');
      if (text === written) {
        if (round === 0) {
          io.stdout.write(`${UNCHANGED}\n`);
          return 0;
        }
        keep = true;
        throw new ClientError(`edit cancelled: the refused change was saved again unchanged; nothing was sent. Your text is kept in ${file}`);
      }
      // The user's text without the header this round wrote (kept whole when they edited the header).
      const head = header(pathText, session.actor, problem, replace);
      body = text.startsWith(head) ? text.slice(head.length) : text;
      let edited: unknown;
      try {
        edited = jsYaml().load(text, { json: true, filename: file });
      } catch (e) {
        problem = `# The file is not YAML:\n${(e as Error).message.split('\n').map((l) => `#   ${l}\n`).join('')}`;
        continue;
      }
      if (edited === undefined || edited === null) {
        io.stdout.write('Edit cancelled: the file is empty. No changes have been submitted\n');
        return 0;
      }
      if (typeof edited !== 'object' || Array.isArray(edited)) {
        problem = '# The file must hold one mapping (the resource), not a list or a scalar.\n';
        continue;
      }
      const patch = mergePatch(before, edited as Record<string, unknown>);
      if (Object.keys(patch).length === 0) {
        io.stdout.write(`${UNCHANGED}\n`);
        return 0;
      }
      // The version read: a change made meanwhile is refused (409) rather than overwritten.
      if (before.version !== undefined && !('version' in patch)) patch.version = before.version;
      // --replace: the edited resource whole, with the version read unless the text names one.
      const whole = { ...(edited as Record<string, unknown>) };
      if (before.version !== undefined && !('version' in whole)) whole.version = before.version;
      try {
        const answer = replace ? await client.request('PUT', pathText, { body: whole, headers }) : await client.request('PATCH', pathText, { body: patch, headers });
        await printAnswer(ctx, answer.body);
        return 0;
      } catch (e) {
        if (e instanceof HttpFailure && fixable(e)) {
          problem = refusalComment(e);
          continue;
        }
        keep = true;
        if (e instanceof HttpFailure || e instanceof Unreachable) {
          e.note = e instanceof HttpFailure && e.answer.status === 409
            ? `svcproxy: ${pathText} changed since it was read; your text is kept in ${file}: run the edit again and apply it to the current resource`
            : `svcproxy: the change was not applied; your text is kept in ${file}`;
        }
        throw e;
      }
    }
  } finally {
    if (!keep) await rm(dir, { recursive: true, force: true });
  }
}
